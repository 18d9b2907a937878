"""``podset-operator``: keeps N pods from a template running for each PodSet."""

from __future__ import annotations

from opsuite_common.startup import importing

with importing():
    from opsuite_common.manager import run_operator
    from podset_operator.handlers import setup


def main() -> None:
    """Console entry point."""
    run_operator("podset-operator", __doc__ or "", setup)


if __name__ == "__main__":
    main()
