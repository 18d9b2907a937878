"""Name a file-based catalog's images by digest: each bundle's ``image`` and its
``relatedImages``, ``repo:tag`` becoming ``repo@sha256:...`` as the registry serves the tag, so
that a disconnected cluster mirrors and pulls exactly what was published (a mirror by digest,
ImageDigestMirrorSet, only redirects digest references).

The release runs it on the catalog it builds the catalog image from, once the images and the
bundles are pushed; hack/olm_images.py runs it on the local plane's catalog the same way, the
registry standing in for ghcr.io. The rewrite is textual (``image: <ref>`` lines), so the
catalog's layout stays as generated and no YAML library is needed.

    python3 hack/pin_digests.py CATALOG_DIR [--registry-for PREFIX=HOST/PREFIX]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import oci_push

_IMAGE_LINE = re.compile(r"^(?P<key>\s*(?:- )?image: )(?P<ref>\S+)$", re.MULTILINE)
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def pinned(reference: str, digest: str) -> str:
    """``repo:tag`` (or ``repo:tag@old``) as ``repo@digest``."""
    if not _DIGEST.match(digest):
        raise ValueError(f"{reference}: not a sha256 digest: {digest!r}")
    name = reference.split("@", 1)[0]
    repository, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"{reference}: no tag to pin")
    return f"{repository}@{digest}"


def pin_text(text: str, resolve: Callable[[str], str]) -> str:
    """Every ``image: repo:tag`` line of a catalog file with the tag's digest."""
    return _IMAGE_LINE.sub(lambda m: m["key"] + pinned(m["ref"], resolve(m["ref"])), text)


def pin_catalog(catalog: Path, resolve: Callable[[str], str]) -> list[str]:
    """Rewrite every YAML file under ``catalog`` in place; return the references pinned."""
    seen: list[str] = []

    def remember(reference: str) -> str:
        seen.append(reference)
        return resolve(reference)

    for path in sorted(catalog.rglob("*.yaml")):
        path.write_text(pin_text(path.read_text(), remember))
    return seen


def registry_resolver(replacements: Sequence[tuple[str, str]] = ()) -> Callable[[str], str]:
    """Resolve a reference's digest from its registry; a reference starting with one of the
    ``(prefix, replacement)`` is looked up under the replacement (a registry standing in for
    the published one)."""

    def resolve(reference: str) -> str:
        for prefix, replacement in replacements:
            if reference.startswith(prefix):
                reference = replacement + reference.removeprefix(prefix)
                break
        return oci_push.manifest_digest(reference)

    return resolve


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("catalog", type=Path)
    parser.add_argument("--registry-for", action="append", default=[], metavar="PREFIX=WHERE")
    args = parser.parse_args(argv)
    replacements = [(item.partition("=")[0], item.partition("=")[2]) for item in args.registry_for]
    for reference in pin_catalog(args.catalog, registry_resolver(replacements)):
        print(f"pinned {reference}")


if __name__ == "__main__":
    main()
