"""``pod-debugger-operator``: adds ephemeral debug containers to the pods a PodDebugger selects.

Besides the common flags (each also an ``OPSUITE_*`` environment variable, e.g.
``OPSUITE_ALLOW_SYSADMIN_PROFILE=true``; a flag given wins):

* ``--allowed-image-prefix PREFIX`` (repeatable; ``OPSUITE_ALLOWED_IMAGE_PREFIXES``,
  comma-separated): only images under one of the prefixes are injected (compared as docker
  references); a PodDebugger with another image is reported (ImageNotAllowed);
* ``--allow-without-admission-policy``: inject even when the authorization admission policy
  is not in force. Without it, nothing is injected until it is (PolicyMissing);
* ``--allow-sysadmin-profile``: inject containers of profile sysadmin (privileged); without
  it such a PodDebugger is reported (ProfileNotAllowed);
* ``--require-requester``: act only for PodDebuggers whose requester the requester policy
  recorded (others are reported, RequesterNotAllowed); a recorded requester is re-checked on
  every pass either way;
* ``--admission-policy-name NAME``: the authorization policy to require (default: the one
  the chart installs).
"""

from __future__ import annotations

from opsuite_common.startup import importing

with importing():
    import argparse
    import os
    import sys
    from collections.abc import Mapping, Sequence

    from opsuite_common.manager import run_operator
    from opsuite_common.options import bool_flag, parse_operator_flags
    from poddebugger_operator.handlers import Settings, setup
    from poddebugger_operator.policy import POLICY_NAME

ENV_PREFIXES = "OPSUITE_ALLOWED_IMAGE_PREFIXES"


def _declare(parser: argparse.ArgumentParser) -> None:
    """The flags of the module docstring; the prefixes' variable is a comma-separated list."""
    parser.add_argument("--allowed-image-prefix", action="append", default=[])
    for switch in (
        "--allow-without-admission-policy",
        "--allow-sysadmin-profile",
        "--require-requester",
    ):
        bool_flag(parser, switch)
    parser.add_argument("--admission-policy-name", default=POLICY_NAME)


def split_args(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[Settings, list[str]]:
    """(this operator's settings, the remaining arguments for the common flags)."""
    env = os.environ if environ is None else environ
    known, rest = parse_operator_flags(_declare, argv, env)
    prefixes = [p for p in known.allowed_image_prefix if p]
    if not prefixes:
        prefixes = [p.strip() for p in env.get(ENV_PREFIXES, "").split(",") if p.strip()]
    settings = Settings(
        allowed_prefixes=tuple(prefixes),
        allow_without_admission_policy=known.allow_without_admission_policy,
        allow_sysadmin_profile=known.allow_sysadmin_profile,
        admission_policy_name=known.admission_policy_name,
        require_requester=known.require_requester,
    )
    return settings, rest


def main() -> None:
    """Console entry point."""
    settings, rest = split_args(sys.argv[1:])
    run_operator(
        "pod-debugger-operator",
        __doc__ or "",
        lambda manager: setup(manager, settings),
        rest,
    )


if __name__ == "__main__":
    main()
