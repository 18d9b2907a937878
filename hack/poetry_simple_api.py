"""Run poetry, resolving PyPI packages through the simple repository API only.

The package mirror on our build machines serves the PEP 691 simple API and wheel
metadata (PEP 658), but not PyPI's per-release JSON API that poetry's PyPI repository
relies on; poetry then reports every package as "not found". This wrapper points the
two methods that use the per-release JSON at the simple API, exactly as poetry's own
LegacyRepository does, so the lock file and installs are unchanged (source: PyPI).
Everywhere else (e.g. GitHub Actions) the result is the same.
"""

from __future__ import annotations

import sys
from typing import Any

from poetry.console.application import main
from poetry.core.packages.package import Package
from poetry.core.packages.utils.link import Link
from poetry.inspection.info import PackageInfo
from poetry.repositories.pypi_repository import PyPiRepository


def _release_info(self: PyPiRepository, name: Any, version: Any) -> dict[str, Any]:
    page = self._get_page(name)
    return self._links_to_data(
        list(page.links_for_version(name, version)),
        PackageInfo(
            name=name,
            version=version.text,
            summary="",
            requires_dist=[],
            requires_python=None,
            files=[],
            yanked=page.yanked(name, version),
            cache_version=str(self.CACHE_VERSION),
        ),
    )


def _links(self: PyPiRepository, package: Package) -> list[Link]:
    return list(self._get_page(package.name).links_for_version(package.name, package.version))


PyPiRepository._get_release_info = _release_info  # type: ignore[method-assign]
PyPiRepository.find_links_for_package = _links  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
