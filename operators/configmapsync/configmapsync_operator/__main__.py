"""``configmapsync-operator``: copies ConfigMaps (and, with ``--secrets``, Secrets) into other
namespaces and keeps them in line.

Besides the common flags (each also an ``OPSUITE_*`` environment variable):

* ``--secrets`` (``OPSUITE_SECRETS=true``): serve SecretSyncs, which needs the rights on Secrets
  that the chart grants with ``secrets.enabled`` (and passes this flag with). Without it the
  operator never reads or writes a Secret, and each SecretSync's status says so
  (SecretsNotEnabled).
"""

from __future__ import annotations

from opsuite_common.startup import importing

with importing():
    import argparse
    import logging
    import sys
    from collections.abc import Mapping, Sequence

    from configmapsync_operator.handlers import setup
    from configmapsync_operator.kinds import SECRETS
    from configmapsync_operator.models import GROUP, VERSION
    from opsuite_common.kube import ApiException
    from opsuite_common.manager import Manager, run_operator
    from opsuite_common.options import bool_flag, parse_operator_flags

log = logging.getLogger(__name__)


def _declare(parser: argparse.ArgumentParser) -> None:
    bool_flag(parser, "--secrets")


def split_args(
    argv: Sequence[str], environ: Mapping[str, str] | None = None
) -> tuple[bool, list[str]]:
    """(whether to serve SecretSyncs, the remaining arguments for the common flags)."""
    known, rest = parse_operator_flags(_declare, argv, environ)
    return bool(known.secrets), rest


async def wire(manager: Manager, secrets: bool = False) -> None:
    """:func:`setup`, once the API server said whether it serves SecretSyncs: after an upgrade
    whose CRDs were not applied (Helm never upgrades ``crds/``), the SecretSync watch would
    hold every pass back (the cache-sync gate), ConfigMapSyncs included."""
    path = f"/apis/{GROUP}/{VERSION}"
    try:
        found = await manager.kube.request("GET", path)
    except ApiException as exc:
        if exc.status != 404:
            raise
        found = {}
    served = any(r.get("name") == SECRETS.plural for r in found.get("resources") or ())
    if not served:
        log.warning(
            "the API server does not serve %s.%s: SecretSyncs are not served; apply the chart's "
            "CRDs (see its README) and restart the operator",
            SECRETS.plural,
            GROUP,
        )
    setup(manager, secrets=secrets, secret_crd=served)


def main() -> None:
    """Console entry point."""
    secrets, rest = split_args(sys.argv[1:])
    run_operator(
        "configmapsync-operator",
        __doc__ or "",
        lambda manager: wire(manager, secrets=secrets),
        rest,
    )


if __name__ == "__main__":
    main()
