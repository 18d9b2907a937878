"""The OLM route's local pieces: pushing OCI archives to a real registry (distribution, the
plane's), the images hack/olm_images.py builds, and OLM's quickstart manifest rewritten for
the real node."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import images
import localplane
import oci_push
import olm_images
import olm_manifest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """The registry binary the plane runs, on a free loopback port, storing in tmp_path."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yaml"
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "storage": {"filesystem": {"rootdirectory": str(tmp_path / "data")}},
                "http": {"addr": f"127.0.0.1:{port}"},
            }
        )
    )
    process = subprocess.Popen(
        [str(localplane.BIN / "registry"), "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not localplane.port_open(port):
            assert process.poll() is None, "the registry exited"
            assert time.monotonic() < deadline, "the registry did not listen within 20 s"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _get(url: str, accept: str = "") -> tuple[bytes, dict[str, str]]:
    request = urllib.request.Request(url)
    if accept:
        request.add_header("Accept", accept)
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read(), dict(response.headers)


def _small_archive(tmp_path: Path, name: str, text: str) -> Path:
    rootfs, layout = tmp_path / f"rootfs-{text}", tmp_path / f"layout-{text}"
    rootfs.mkdir()
    (rootfs / "hello").write_text(text)
    layer = images.write_layer(layout, rootfs, mtime=0)
    config = images.ImageConfig(labels={"x": text})
    archive = tmp_path / f"{text}.tar"
    images.archive_layout(layout, archive, images.write_image(layout, [layer], config), [name])
    return archive


def test_push_puts_every_blob_and_the_tag(tmp_path: Path, registry: str) -> None:
    archive = _small_archive(tmp_path, "example.com/a/b:1", "one")
    digest = oci_push.push(archive, f"{registry}/team/app:v1")
    index, blobs = images.read_archive(archive)
    assert digest == index["manifests"][0]["digest"]
    body, headers = _get(f"http://{registry}/v2/team/app/manifests/v1", images.MEDIA_MANIFEST)
    assert headers["Docker-Content-Digest"] == digest
    assert body == blobs[digest]
    manifest = json.loads(body)
    for blob in [manifest["config"], *manifest["layers"]]:
        assert (
            _get(f"http://{registry}/v2/team/app/blobs/{blob['digest']}")[0]
            == blobs[blob["digest"]]
        )
    # Pushing again (blobs already there) and a second image to the same repository work.
    assert oci_push.push(archive, f"{registry}/team/app:v1") == digest
    other = oci_push.push(_small_archive(tmp_path, "x/y:2", "two"), f"{registry}/team/app:v2")
    assert other != digest
    tags = json.loads(_get(f"http://{registry}/v2/team/app/tags/list")[0])["tags"]
    assert sorted(tags) == ["v1", "v2"]


def test_retag_moves_a_tag_to_another_tags_manifest(tmp_path: Path, registry: str) -> None:
    first = oci_push.push(_small_archive(tmp_path, "x/y:1", "one"), f"{registry}/team/app:v1")
    second = oci_push.push(_small_archive(tmp_path, "x/y:2", "two"), f"{registry}/team/app:v2")
    assert oci_push.retag(f"{registry}/team/app:v1", "moving") == first
    url = f"http://{registry}/v2/team/app/manifests/moving"
    assert _get(url, images.MEDIA_MANIFEST)[1]["Docker-Content-Digest"] == first
    assert oci_push.retag(f"{registry}/team/app:v2", "moving") == second
    assert _get(url, images.MEDIA_MANIFEST)[1]["Docker-Content-Digest"] == second


@pytest.mark.parametrize(
    ("reference", "error"),
    [
        ("team/app:v1", "name the registry"),
        ("127.0.0.1:5000/team/app", "name a tag"),
        ("localhost/app/x", "name a tag"),
    ],
)
def test_references_must_name_a_registry_and_a_tag(reference: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        oci_push.split_reference(reference)


def test_bundle_image_is_the_bundle_dockerfiles_layout(tmp_path: Path) -> None:
    archive, name = olm_images.build_bundle("podset-operator", "v9.9.9")
    assert name == "ghcr.io/opsuite/podset-operator-bundle:v9.9.9"
    index, blobs = images.read_archive(archive)
    manifest = json.loads(blobs[index["manifests"][0]["digest"]])
    config = json.loads(blobs[manifest["config"]["digest"]])
    labels = config["config"]["Labels"]
    assert labels["operators.operatorframework.io.bundle.package.v1"] == "podset-operator"
    assert labels["operators.operatorframework.io.bundle.manifests.v1"] == "manifests/"
    images.unpack_image(archive, tmp_path / "root")
    source = ROOT / "bundle" / "podset-operator"
    for part in ("manifests", "metadata"):
        expected = sorted(p.name for p in (source / part).iterdir())
        assert sorted(p.name for p in (tmp_path / "root" / part).iterdir()) == expected


QUICKSTART = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: catalog-operator, namespace: olm}
spec:
  template:
    spec:
      containers:
        - name: catalog-operator
          image: quay.io/operator-framework/olm@sha256:abc
          args: ['-namespace', olm, -util-image, ' quay.io/operator-framework/olm@sha256:abc',
                 -configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest]
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata: {name: packageserver, namespace: olm}
spec:
  install:
    spec:
      deployments:
        - spec:
            template:
              spec:
                containers:
                  - {name: packageserver, image: quay.io/operator-framework/olm@sha256:abc}
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: operatorhubio-catalog, namespace: olm}
"""


def test_quickstart_rewrite_replaces_olm_and_opm_images_and_drops_the_internet_catalog() -> None:
    documents = list(yaml.safe_load_all(QUICKSTART))
    deployment, csv = olm_manifest.rewrite(documents, "local/olm-tools:1")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "local/olm-tools:1"
    assert container["args"] == [
        "--namespace",
        "olm",
        "--util-image",
        "local/olm-tools:1",
        "--configmapServerImage=quay.io/operator-framework/configmap-operator-registry:latest",
        "--opmImage=local/olm-tools:1",
    ]
    (server,) = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"][
        "containers"
    ]
    assert server["image"] == "local/olm-tools:1"
    kinds = [d["kind"] for d in olm_manifest.rewrite(list(yaml.safe_load_all(QUICKSTART)), None)]
    assert kinds == ["Deployment", "ClusterServiceVersion"]
