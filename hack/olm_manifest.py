"""OLM's quickstart olm.yaml (from the pinned operator-lifecycle-manager module), ready to apply:
without its operatorhub.io CatalogSource (nothing is fetched from the internet), and with
``--image`` every OLM and opm image it names replaced by one image that holds them all
(hack/olm_images.py's olm-tools: olm, catalog, package-server, cpb, opm), catalog-operator told
to use it for bundle unpacking too (``-util-image``, ``-opmImage``).

Usage: python3 hack/olm_manifest.py OLM_YAML [--image IMAGE] > olm.yaml
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

UPSTREAM_IMAGES = ("quay.io/operator-framework/olm", "quay.io/operator-framework/opm")


def _containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if obj.get("kind") == "Deployment":
        yield from obj["spec"]["template"]["spec"]["containers"]
    elif obj.get("kind") == "ClusterServiceVersion":
        for deployment in obj["spec"]["install"]["spec"]["deployments"]:
            yield from deployment["spec"]["template"]["spec"]["containers"]


def _replace(value: str, image: str) -> str:
    return image if value.strip().startswith(UPSTREAM_IMAGES) else value


def _long_flag(arg: str) -> str:
    """``-name`` as ``--name``: the quickstart writes catalog-operator's flags with one dash,
    which its pflag command line (v0.46) takes for shorthands ("unknown shorthand flag: 'n' in
    -namespace"); Go's flag package takes both forms."""
    return f"-{arg}" if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2 else arg


def rewrite(documents: Sequence[dict[str, Any] | None], image: str | None) -> list[dict[str, Any]]:
    """The quickstart's objects, without the operatorhub.io catalog, flags with two dashes,
    images replaced."""
    out = []
    for obj in documents:
        if not obj or obj.get("kind") == "CatalogSource":
            continue
        for container in _containers(obj):
            args = [_long_flag(str(a).strip()) for a in container.get("args", [])]
            if image:
                container["image"] = image
                args = [_replace(a, image) for a in args]
                if container["name"] == "catalog-operator":
                    args.append(f"--opmImage={image}")
            if "args" in container:
                container["args"] = args
        out.append(obj)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("olm_yaml", type=Path)
    parser.add_argument("--image", help="the image standing in for OLM's and opm's")
    args = parser.parse_args(argv)
    documents = list(yaml.safe_load_all(args.olm_yaml.read_text()))
    yaml.safe_dump_all(rewrite(documents, args.image), sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
