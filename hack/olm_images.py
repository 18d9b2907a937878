"""The images an OLM install pulls, built without Docker and pushed to the local plane's
registry under the names the bundles and the catalog give them (ghcr.io/opsuite/..., which the
real node's containerd takes from that registry):

* ``<package>-bundle:v<version>``: ``bundle/<package>/`` as its bundle.Dockerfile lays it out
  (FROM scratch, manifests/, metadata/ and tests/scorecard/, the bundle labels);
* ``opsuite-catalog:v<version>``: ``catalog/`` served by ``opm serve``, as the image
  ``opm generate dockerfile`` describes (its cache built at image build time), its bundle
  images and relatedImages named by digest (hack/pin_digests.py, as in the release);
* ``olm-tools:<hash>``: what upstream's OLM and opm images hold, built from the pinned modules:
  ``olm``, ``catalog``, ``package-server``, ``cpb``, ``opm``, ``grpc_health_probe``, and busybox
  for ``cp`` (the bundle
  unpack Job copies ``cpb`` with it, runs it in the bundle image, then ``opm alpha bundle
  extract``); hack/olm_manifest.py puts it in OLM's quickstart manifest;
* each operator image (``hack/images.py``'s archive) as ``<target>:<version>``, the CSVs' name.

Usage: python3 hack/olm_images.py REGISTRY OUTPUT: REGISTRY is host:port; OUTPUT gets the names
pushed, by role (catalog, tools, bundle/<package>, operator/<target>), as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import images
import oci_push
import pin_digests
from images import BIN, LOCAL, OUT, ROOT, ImageConfig, archive_layout, write_image, write_layer

PUBLISHED = "ghcr.io/opsuite"
"""Where the release publishes the images; the bundles and the catalog name them there."""
OLM_OUT = OUT / "olm"


def version() -> str:
    """The project's version (pyproject.toml), which the bundles and the CSVs carry."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def bundle_labels(dockerfile: Path) -> dict[str, str]:
    """The LABEL lines of a generated bundle.Dockerfile."""
    labels = {}
    for line in dockerfile.read_text().splitlines():
        if line.startswith("LABEL "):
            key, _, value = line.removeprefix("LABEL ").partition("=")
            labels[key] = value
    return labels


def _image(rootfs: Path, archive: Path, config: ImageConfig, names: Sequence[str]) -> None:
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        layout = Path(tmp)
        layer = write_layer(layout, rootfs, mtime=0)
        archive_layout(layout, archive, write_image(layout, [layer], config), names)


def build_bundle(package: str, tag: str) -> tuple[Path, str]:
    """A bundle image's archive and its published name."""
    source = ROOT / "bundle" / package
    name = f"{PUBLISHED}/{package}-bundle:{tag}"
    archive = OLM_OUT / f"{package}-bundle.tar"
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs = Path(tmp) / "rootfs"
        for part in ("manifests", "metadata", "tests"):
            shutil.copytree(source / part, rootfs / part)
        labels = bundle_labels(source / "bundle.Dockerfile")
        _image(rootfs, archive, ImageConfig(env=(), labels=labels), [name])
    return archive, name


TOOLS = {"olm": "olm", "catalog": "catalog", "package-server": "package-server"}
TOOLS |= {"cpb": "cpb", "opm": "opm", "grpc-health-probe": "grpc_health_probe"}
"""Binaries of .local/bin and their names in the tools image's /bin."""


def _tools_rootfs(rootfs: Path) -> None:
    images.busybox_rootfs(rootfs)
    for binary, name in TOOLS.items():
        shutil.copy2((BIN / binary).resolve(), rootfs / "bin" / name)


def build_tools() -> tuple[Path, str]:
    """OLM's and opm's stand-in, as upstream's OLM image runs (uid 1001); named after its
    inputs."""
    inputs = images.hash_inputs([(BIN / binary).resolve() for binary in TOOLS])
    name = f"{PUBLISHED}/olm-tools:{inputs[:12]}"
    archive = OLM_OUT / "olm-tools.tar"
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs = Path(tmp) / "rootfs"
        _tools_rootfs(rootfs)
        _image(rootfs, archive, ImageConfig(cmd=("sh",), user="1001"), [name])
    return archive, name


def build_catalog(tag: str, resolve: Callable[[str], str]) -> tuple[Path, str]:
    """catalog/ served by opm on :50051 (the CatalogSource's pod), as a non-root user, its
    images named by the digest ``resolve`` gives (as the release does)."""
    name = f"{PUBLISHED}/opsuite-catalog:{tag}"
    archive = OLM_OUT / "opsuite-catalog.tar"
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs = Path(tmp) / "rootfs"
        images.busybox_rootfs(rootfs)
        shutil.copy2((BIN / "opm").resolve(), rootfs / "bin" / "opm")
        # OLM probes the catalog pod with it, as upstream's opm image ships it.
        probe = (BIN / "grpc-health-probe").resolve()
        shutil.copy2(probe, rootfs / "bin" / "grpc_health_probe")
        shutil.copytree(ROOT / "catalog", rootfs / "configs")
        pin_digests.pin_catalog(rootfs / "configs", resolve)
        # What the generated catalog.Dockerfile's RUN does: opm checks this cache at start.
        opm = [str(BIN / "opm"), "serve", str(rootfs / "configs"), "--cache-only"]
        images.run([*opm, f"--cache-dir={rootfs / 'tmp' / 'cache'}"])
        config = ImageConfig(
            entrypoint=("/bin/opm",),
            cmd=("serve", "/configs", "--cache-dir=/tmp/cache"),
            user="1001",
            labels={"operators.operatorframework.io.index.configs.v1": "/configs"},
        )
        _image(rootfs, archive, config, [name])
    return archive, name


def publish(registry: str) -> dict[str, str]:
    """Build and push everything; return the published names by role."""
    OLM_OUT.mkdir(parents=True, exist_ok=True)
    tag = f"v{version()}"
    pushed: dict[str, str] = {}

    def push(archive: Path, name: str, role: str) -> None:
        digest = oci_push.push(archive, name.replace(PUBLISHED, f"{registry}/opsuite", 1))
        images.log(f"pushed {name} ({digest[:19]})")
        pushed[role] = name

    # The release's order: the images, then the bundles naming them, then the catalog naming
    # both by digest.
    for target in images.TARGETS:
        push(OUT / f"{target}.tar", f"{PUBLISHED}/{target}:{version()}", f"operator/{target}")
    for package in sorted(p.name for p in (ROOT / "bundle").iterdir() if p.is_dir()):
        push(*build_bundle(package, tag), f"bundle/{package}")
    resolve = pin_digests.registry_resolver([(PUBLISHED, f"{registry}/opsuite")])
    push(*build_catalog(tag, resolve), "catalog")
    push(*build_tools(), "tools")
    return pushed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("registry", help="host:port of the registry that stands in for ghcr.io")
    parser.add_argument("output", type=Path, help="where to write the published names (JSON)")
    args = parser.parse_args(argv)
    args.output.write_text(json.dumps(publish(args.registry), indent=2) + "\n")


if __name__ == "__main__":
    main()
