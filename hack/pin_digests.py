"""Name a file-based catalog's images by digest: each bundle's ``image`` and its
``relatedImages``, ``repo:tag`` becoming ``repo@sha256:...`` as the registry serves the tag, so
that a disconnected cluster mirrors and pulls exactly what was published (a mirror by digest,
ImageDigestMirrorSet, only redirects digest references).

The release runs it on the catalog it builds the catalog image from, once the images and the
bundles are pushed; hack/olm_images.py runs it on the local plane's catalog the same way, the
registry standing in for ghcr.io. The rewrite is textual (``image: <ref>`` lines), so the
catalog's layout stays as generated and no YAML library is needed.

    python3 hack/pin_digests.py CATALOG_DIR [--registry-for PREFIX=HOST/PREFIX]
    python3 hack/pin_digests.py --chart CHART_DIR --version VERSION

With ``--chart`` it sets a chart's default ``image.digest`` (values.yaml) to the digest of
``<image.repository>:<VERSION>``, which the release runs before ``helm package``: the published
chart pulls exactly the published image, by digest, unless a user sets the tag or digest.
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


_VALUES_IMAGE = re.compile(
    r'^image:\n(?:  #.*\n)*  repository: "?(?P<repository>[^"\n]+)"?\n(?P<middle>(?:  .*\n)*?)'
    r'(?P<key>  digest: )""$',
    re.MULTILINE,
)


def pin_chart(chart: Path, version: str, resolve: Callable[[str], str]) -> str:
    """Set ``image.digest`` in ``chart``'s values.yaml to that of ``<repository>:<version>``;
    return the digest."""
    values = chart / "values.yaml"
    text = values.read_text()
    found = _VALUES_IMAGE.search(text)
    if found is None:
        raise ValueError(f"{values}: no image with an empty digest to pin")
    digest = resolve(f"{found['repository']}:{version}")
    if not _DIGEST.match(digest):
        raise ValueError(f"{found['repository']}:{version}: not a sha256 digest: {digest!r}")
    end = found.end("key")
    values.write_text(text[:end] + f'"{digest}"' + text[end + 2 :])
    return digest


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
    parser.add_argument("catalog", type=Path, nargs="?")
    parser.add_argument("--registry-for", action="append", default=[], metavar="PREFIX=WHERE")
    parser.add_argument("--chart", type=Path)
    parser.add_argument("--version")
    args = parser.parse_args(argv)
    replacements = [(item.partition("=")[0], item.partition("=")[2]) for item in args.registry_for]
    resolve = registry_resolver(replacements)
    if args.chart is not None:
        if not args.version or args.catalog is not None:
            parser.error("--chart takes --version and no catalog")
        print(f"pinned {args.chart}: {pin_chart(args.chart, args.version, resolve)}")
        return
    if args.catalog is None:
        parser.error("a catalog directory or --chart")
    for reference in pin_catalog(args.catalog, resolve):
        print(f"pinned {reference}")


if __name__ == "__main__":
    main()
