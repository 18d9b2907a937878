"""``configmapsync-operator``: copies ConfigMaps (and, with ``--secrets``, Secrets) into other
namespaces and keeps them in line.

Besides the common flags (each also an ``OPSUITE_*`` environment variable):

* ``--secrets`` (``OPSUITE_SECRETS=true``): serve SecretSyncs, which needs the rights on Secrets
  that the chart grants with ``secrets.enabled`` (and passes this flag with). Without it the
  operator never reads or writes a Secret, and each SecretSync's status says so
  (SecretsNotEnabled).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from configmapsync_operator.handlers import setup
from opsuite_common.manager import run_operator
from opsuite_common.options import bool_flag, parse_operator_flags


def _declare(parser: argparse.ArgumentParser) -> None:
    bool_flag(parser, "--secrets")


def split_args(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[bool, list[str]]:
    """(whether to serve SecretSyncs, the remaining arguments for the common flags)."""
    known, rest = parse_operator_flags(_declare, argv, environ)
    return bool(known.secrets), rest


def main() -> None:
    """Console entry point."""
    secrets, rest = split_args(sys.argv[1:])
    run_operator(
        "configmapsync-operator",
        __doc__ or "",
        lambda manager: setup(manager, secrets=secrets),
        rest,
    )


if __name__ == "__main__":
    main()
