#!/usr/bin/env python3
"""Build every container image the project needs, locally: no Docker engine, no registry.

``python3 hack/images.py build`` writes one OCI image archive per image into ``.local/images/``
(``ctr -n k8s.io images import <archive>`` names the image from the archive's index) and
``.local/images/images.json``, which lists ``{"name", "archive"}`` for every image name:

- a Python 3.11 base from Debian bookworm packages (debootstrap), slimmed, kept as an OCI layout
  folder in the cache (``~/.cache/opsuite/images``), keyed by its package list;
- busybox from Debian's busybox-static, with its applet links (and the stand-ins the e2e tests
  and benchmarks name: ``nginx``, ``alpine``);
- the pod sandbox image ``registry.k8s.io/pause`` from ``hack/image/pause.c``;
- the three operator images from the ``Dockerfile``, built by a temporary ``buildkitd`` (OCI
  worker, runc) on top of that base, passed as a named build context.

Everything is skipped when its inputs have not changed since it was built, so a warm run takes
seconds. ``python3 hack/images.py verify`` runs each operator image's ``--help`` under runc as
UID 65532 with a read-only root filesystem. This is the command line; the toolchain is the
``oci`` package beside it (hack/oci/). docs/images.md describes the whole.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from oci.archive import archive_layout
from oci.buildkit import build_operators
from oci.debian_base import BASE_NAME, build_base
from oci.layout import full_name
from oci.runc_verify import verify_operator
from oci.small_images import build_busybox, build_pause
from oci.workspace import OUT, ROOT, Built, fresh, log, write_stamp

# The list of operators, standard library only: `make images` runs this script with the
# machine's python3, before the virtualenv exists, so it finds shared/ itself.
sys.path.insert(0, str(ROOT / "shared"))
from opsuite_packaging.operators import OPERATORS

TARGETS = [op.image for op in OPERATORS]


def build(args: argparse.Namespace) -> None:
    only = set(args.only.split(",")) if args.only else None
    start = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    images: list[Built] = []

    def wanted(name: str) -> bool:
        return only is None or name in only

    targets = [t for t in TARGETS if wanted(t) or wanted("operators")]
    if wanted("base") or targets:
        base_layout, base = build_base(force=args.force and wanted("base"))
    if wanted("base"):
        archive = OUT / "python-base.tar"
        stamp = OUT / ".stamps/python-base"
        if args.force or not fresh(stamp, base.digest, [archive]):
            archive_layout(base_layout, archive, base, [BASE_NAME])
            write_stamp(stamp, base.digest)
        images.append(Built(archive, [BASE_NAME]))
    if wanted("busybox"):
        images += build_busybox(args.force)
    if wanted("pause"):
        images += build_pause(args.force)
    if targets:
        images += build_operators(base_layout, base, targets, args.force)
    write_listing(images)
    for image in images:
        size = image.archive.stat().st_size / 2**20
        log(f"{image.archive.relative_to(ROOT)} ({size:.1f} MiB): {', '.join(image.names)}")
    log(f"images built in {time.monotonic() - start:.1f} s")


def write_listing(images: Sequence[Built]) -> None:
    """images.json: the images just built, and those of an earlier build that still exist
    (a build of some images, such as the plane's workload images, keeps the others listed); an
    archive built again lists only the names it carries now."""
    listing = OUT / "images.json"
    built = {full_name(name): str(image.archive) for image in images for name in image.names}
    earlier = json.loads(listing.read_text()) if listing.exists() else []
    rebuilt = set(built.values())
    kept = {
        entry["name"]: entry["archive"]
        for entry in earlier
        if entry["archive"] not in rebuilt and Path(entry["archive"]).exists()
    }
    entries = [{"name": name, "archive": archive} for name, archive in {**kept, **built}.items()]
    listing.write_text(json.dumps(entries, indent=2) + "\n")


def verify(args: argparse.Namespace) -> None:
    """Run each operator image's entrypoint with --help under runc: UID 65532 from the image,
    read-only root filesystem, no network."""
    for target in args.targets or TARGETS:
        verify_operator(OUT / f"{target}.tar", target)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build what is out of date into .local/images")
    p_build.add_argument("--force", action="store_true", help="rebuild even what is up to date")
    p_build.add_argument(
        "--only",
        help="comma-separated: base, busybox, pause, operators or an operator target",
    )
    p_build.set_defaults(func=build)
    p_verify = sub.add_parser("verify", help="run each operator image's --help under runc")
    p_verify.add_argument("targets", nargs="*", help=f"default: {' '.join(TARGETS)}")
    p_verify.set_defaults(func=verify)
    args = parser.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
