"""The OLM route's local pieces: pushing OCI archives to a real registry (distribution, the
plane's), the images hack/olm_images.py builds, and OLM's quickstart manifest rewritten for
the real node."""

from __future__ import annotations

import hashlib
import json
import shutil
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
import localplane
import oci_push
import olm_images
import olm_manifest
import pin_digests
from oci.archive import archive_layout, read_archive, unpack_image
from oci.layer import write_layer
from oci.layout import MEDIA_MANIFEST, ImageConfig, write_image

from opsuite_packaging.operators import OPERATORS

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
    layer = write_layer(layout, rootfs, mtime=0)
    config = ImageConfig(labels={"x": text})
    archive = tmp_path / f"{text}.tar"
    archive_layout(layout, archive, write_image(layout, [layer], config), [name])
    return archive


def test_push_puts_every_blob_and_the_tag(tmp_path: Path, registry: str) -> None:
    archive = _small_archive(tmp_path, "example.com/a/b:1", "one")
    digest = oci_push.push(archive, f"{registry}/team/app:v1")
    index, blobs = read_archive(archive)
    assert digest == index["manifests"][0]["digest"]
    body, headers = _get(f"http://{registry}/v2/team/app/manifests/v1", MEDIA_MANIFEST)
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
    assert _get(url, MEDIA_MANIFEST)[1]["Docker-Content-Digest"] == first
    assert oci_push.retag(f"{registry}/team/app:v2", "moving") == second
    assert _get(url, MEDIA_MANIFEST)[1]["Docker-Content-Digest"] == second


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
    index, blobs = read_archive(archive)
    manifest = json.loads(blobs[index["manifests"][0]["digest"]])
    config = json.loads(blobs[manifest["config"]["digest"]])
    labels = config["config"]["Labels"]
    assert labels["operators.operatorframework.io.bundle.package.v1"] == "podset-operator"
    assert labels["operators.operatorframework.io.bundle.manifests.v1"] == "manifests/"
    unpack_image(archive, tmp_path / "root")
    source = ROOT / "bundle" / "podset-operator"
    assert labels["operators.operatorframework.io.test.config.v1"] == "tests/scorecard/"
    for part in ("manifests", "metadata", "tests/scorecard"):
        expected = sorted(p.name for p in (source / part).iterdir())
        assert sorted(p.name for p in (tmp_path / "root" / part).iterdir()) == expected


def test_a_bundle_built_with_a_resolver_names_the_operator_image_by_digest(
    tmp_path: Path,
) -> None:
    digest = "sha256:" + "ab" * 32
    asked: list[str] = []

    def resolve(reference: str) -> str:
        asked.append(reference)
        return digest

    archive, _ = olm_images.build_bundle("podset-operator", "v9.9.9", resolve=resolve)
    unpack_image(archive, tmp_path / "root")
    csv = tmp_path / "root" / "manifests" / "podset-operator.clusterserviceversion.yaml"
    text = csv.read_text()
    assert f"image: ghcr.io/opsuite/podset-operator@{digest}" in text
    assert "image: ghcr.io/opsuite/podset-operator:" not in text
    assert set(asked) == {r for r in asked if r.startswith("ghcr.io/opsuite/podset-operator:")}
    assert len(asked) == 2  # the Deployment's container and relatedImages


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


def test_artifacthub_repo_is_pushed_with_artifact_hubs_media_types(
    tmp_path: Path, registry: str
) -> None:
    """What ``oras push REF:artifacthub.io --config /dev/null:<config> FILE:<layer>`` makes, as
    Artifact Hub reads it: the manifest names both media types and the layer is the file."""
    source = ROOT / "charts" / "artifacthub-repo.yml"
    digest = oci_push.push_artifacthub_repo(f"{registry}/charts/podset-operator", source)
    body, headers = _get(
        f"http://{registry}/v2/charts/podset-operator/manifests/artifacthub.io",
        MEDIA_MANIFEST,
    )
    assert headers["Docker-Content-Digest"] == digest
    manifest = json.loads(body)
    assert manifest["config"]["mediaType"] == "application/vnd.cncf.artifacthub.config.v1+yaml"
    assert manifest["config"]["size"] == 0
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == (
        "application/vnd.cncf.artifacthub.repository-metadata.layer.v1.yaml"
    )
    assert layer["annotations"]["org.opencontainers.image.title"] == "artifacthub-repo.yml"
    blob = _get(f"http://{registry}/v2/charts/podset-operator/blobs/{layer['digest']}")[0]
    assert blob == source.read_bytes()
    assert yaml.safe_load(blob)["owners"]


@pytest.mark.parametrize(
    ("registry", "base"),
    [
        ("127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("localhost", "http://localhost"),
        ("ghcr.io", "https://ghcr.io"),
        ("registry.example.com:5000", "https://registry.example.com:5000"),
    ],
)
def test_plain_http_only_on_loopback(registry: str, base: str) -> None:
    assert oci_push.base_url(registry) == base


DIGEST = "sha256:" + "a" * 64


def _fake(reference: str) -> str:
    return "sha256:" + hashlib.sha256(reference.encode()).hexdigest()


def test_pinned_replaces_the_tag() -> None:
    assert pin_digests.pinned("ghcr.io/o/x:v1", DIGEST) == f"ghcr.io/o/x@{DIGEST}"
    assert pin_digests.pinned("host:5000/o/x:1.0", DIGEST) == f"host:5000/o/x@{DIGEST}"
    with pytest.raises(ValueError, match="no tag"):
        pin_digests.pinned("host:5000/o/x", DIGEST)
    with pytest.raises(ValueError, match="digest"):
        pin_digests.pinned("ghcr.io/o/x:v1", "sha256:short")


def test_catalog_bundle_and_related_images_are_pinned(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog"
    shutil.copytree(ROOT / "catalog", catalog)
    pinned = pin_digests.pin_catalog(catalog, _fake)
    for package in (op.image for op in OPERATORS):
        bundle = f"ghcr.io/opsuite/{package}-bundle:v0.1.0"
        assert bundle in pinned
        documents = list(yaml.safe_load_all((catalog / package / "catalog.yaml").read_text()))
        (entry,) = [d for d in documents if d["schema"] == "olm.bundle"]
        assert entry["image"] == f"ghcr.io/opsuite/{package}-bundle@{_fake(bundle)}"
        related = [r["image"] for r in entry["relatedImages"]]
        assert related
        assert all("@sha256:" in image and ":v0" not in image for image in related)
        # Everything else is as generated: the package, its channel, the bundle's properties.
        original = list(
            yaml.safe_load_all((ROOT / "catalog" / package / "catalog.yaml").read_text())
        )
        assert [d for d in documents if d["schema"] != "olm.bundle"] == [
            d for d in original if d["schema"] != "olm.bundle"
        ]
        (before,) = [d for d in original if d["schema"] == "olm.bundle"]
        assert entry["properties"] == before["properties"]
    opm = shutil.which("opm") or str(ROOT / ".local" / "bin" / "opm")
    done = subprocess.run([opm, "validate", str(catalog)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_resolver_reads_the_digest_the_registry_serves(
    tmp_path: Path,
    registry: str,
) -> None:
    archive = _small_archive(tmp_path, "ghcr.io/opsuite/app:1", "one")
    digest = oci_push.push(archive, f"{registry}/opsuite/app:1")
    resolve = pin_digests.registry_resolver([("ghcr.io/opsuite", f"{registry}/opsuite")])
    assert resolve("ghcr.io/opsuite/app:1") == digest
    with pytest.raises(Exception, match="404"):
        resolve("ghcr.io/opsuite/app:missing")


@pytest.mark.parametrize("chart", [op.image for op in OPERATORS])
def test_a_released_chart_pulls_its_image_by_digest(tmp_path: Path, chart: str) -> None:
    """What the release does before ``helm package``: the chart's default image.digest is that
    of the image published under the chart's version."""
    shutil.copytree(ROOT / "charts" / chart, tmp_path / chart)
    digest = "sha256:" + "cd" * 32
    asked: list[str] = []

    def resolve(reference: str) -> str:
        asked.append(reference)
        return digest

    assert pin_digests.pin_chart(tmp_path / chart, "1.2.3", resolve) == digest
    assert asked == [f"ghcr.io/opsuite/{chart}:1.2.3"]
    values = yaml.safe_load((tmp_path / chart / "values.yaml").read_text())
    assert values["image"]["digest"] == digest
    assert (tmp_path / chart / "values.yaml").read_text().count(digest) == 1
    with pytest.raises(ValueError, match="empty digest"):
        pin_digests.pin_chart(tmp_path / chart, "1.2.3", resolve)
