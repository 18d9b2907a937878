"""``configmapsync-operator``: copies ConfigMaps into other namespaces and keeps them in line."""

from __future__ import annotations

from configmapsync_operator.handlers import setup
from opsuite_common.manager import run_operator


def main() -> None:
    """Console entry point."""
    run_operator("configmapsync-operator", __doc__ or "", setup)


if __name__ == "__main__":
    main()
