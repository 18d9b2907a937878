"""``pod-debugger-operator``: adds ephemeral debug containers to the pods a PodDebugger selects.

Besides the common flags: ``--allowed-image-prefix PREFIX`` (repeatable; also
``OPSUITE_ALLOWED_IMAGE_PREFIXES``, comma-separated): only images starting with one of the
prefixes are injected; a PodDebugger with another image is reported (ImageNotAllowed).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence

from opsuite_common.manager import run_operator
from poddebugger_operator.handlers import setup

ENV_PREFIXES = "OPSUITE_ALLOWED_IMAGE_PREFIXES"


def split_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(allowed image prefixes, the remaining arguments for the common flags)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--allowed-image-prefix", action="append", default=[])
    known, rest = parser.parse_known_args(list(argv))
    prefixes = [p for p in known.allowed_image_prefix if p]
    if not prefixes:
        prefixes = [p.strip() for p in os.environ.get(ENV_PREFIXES, "").split(",") if p.strip()]
    return prefixes, rest


def main() -> None:
    """Console entry point."""
    prefixes, rest = split_args(sys.argv[1:])
    run_operator(
        "pod-debugger-operator",
        __doc__ or "",
        functools.partial(setup, allowed_prefixes=prefixes),
        rest,
    )


if __name__ == "__main__":
    main()
