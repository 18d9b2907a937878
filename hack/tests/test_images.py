"""The image toolchain's pure parts (hack/oci/, hack/images.py): OCI layouts and archives,
layers, names, the mirror, the hashes, the listing.

Building the images themselves (debootstrap, BuildKit, gcc) is `make images`; not run here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import images
from oci.archive import archive_layout, read_archive, unpack_image
from oci.debian_base import debian_mirror, slim
from oci.layer import write_layer
from oci.layout import (
    DEFAULT_PATH,
    MEDIA_CONFIG,
    MEDIA_INDEX,
    MEDIA_LAYER_GZIP,
    MEDIA_MANIFEST,
    Descriptor,
    ImageConfig,
    blob_path,
    full_name,
    write_blob,
    write_image,
)
from oci.workspace import Built, hash_inputs


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_tree(root: Path) -> Path:
    """A small root filesystem: files, a directory, a symlink, a hard link, an executable and a
    directory whose contents an image leaves out."""
    (root / "etc").mkdir(parents=True)
    (root / "etc/hello").write_text("hello\n")
    (root / "bin").mkdir()
    tool = root / "bin/tool"
    tool.write_bytes(b"#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    (root / "bin/alias").symlink_to("tool")
    os.link(tool, root / "bin/hard")
    (root / "dev").mkdir()
    (root / "dev/leftover").write_text("x")
    (root / "empty").mkdir()
    return root


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, Descriptor]:
    """An archive of one image with two names, from a layout that also holds an unrelated blob."""
    layout = tmp_path / "layout"
    layer = write_layer(layout, make_tree(tmp_path / "rootfs"), mtime=0, exclude=["dev"])
    write_blob(layout, b"not part of the image", "application/octet-stream")
    config = ImageConfig(entrypoint=("/bin/tool",), user="65532:65532", labels={"a": "b"})
    manifest = write_image(layout, [layer], config)
    out = tmp_path / "out/image.tar"
    archive_layout(layout, out, manifest, ["busybox:1.37", "opsuite.local/x/y:dev"])
    return out, manifest


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            out[m.name] = f.read() if f else b""
        return out


def test_archive_is_an_oci_layout_whose_blobs_match_their_digests(
    archive: tuple[Path, Descriptor],
) -> None:
    path, _manifest = archive
    files = members(path)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    blobs = {name: data for name, data in files.items() if name.startswith("blobs/")}
    assert set(files) == {"oci-layout", "index.json", *blobs}
    for name, data in blobs.items():
        assert name == "blobs/" + sha256(data).replace(":", "/")
    # The manifest, its config and its one layer; not the layout's other blob.
    assert len(blobs) == 3
    assert sha256(b"not part of the image").replace(":", "/") not in {n[6:] for n in blobs}


def test_index_names_the_manifest_for_containerd_and_oci(
    archive: tuple[Path, Descriptor],
) -> None:
    path, manifest = archive
    index, blobs = read_archive(path)
    assert index["schemaVersion"] == 2
    assert index["mediaType"] == MEDIA_INDEX
    entries = index["manifests"]
    assert [e["annotations"] for e in entries] == [
        {
            "io.containerd.image.name": "docker.io/library/busybox:1.37",
            "org.opencontainers.image.ref.name": "1.37",
        },
        {
            "io.containerd.image.name": "opsuite.local/x/y:dev",
            "org.opencontainers.image.ref.name": "dev",
        },
    ]
    for entry in entries:
        assert entry["mediaType"] == MEDIA_MANIFEST
        assert entry["digest"] == manifest.digest
        assert entry["size"] == len(blobs[manifest.digest])
        assert entry["platform"] == {"architecture": "amd64", "os": "linux"}


def test_manifest_config_and_layer_agree(archive: tuple[Path, Descriptor]) -> None:
    path, manifest = archive
    _, blobs = read_archive(path)
    body: dict[str, Any] = json.loads(blobs[manifest.digest])
    assert body["schemaVersion"] == 2
    assert body["mediaType"] == MEDIA_MANIFEST
    assert body["config"]["mediaType"] == MEDIA_CONFIG
    assert body["config"]["size"] == len(blobs[body["config"]["digest"]])
    config = json.loads(blobs[body["config"]["digest"]])
    (layer,) = body["layers"]
    assert layer["mediaType"] == MEDIA_LAYER_GZIP
    assert layer["size"] == len(blobs[layer["digest"]])
    uncompressed = gzip.decompress(blobs[layer["digest"]])
    assert config["rootfs"] == {"type": "layers", "diff_ids": [sha256(uncompressed)]}
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"] == {
        "Env": [f"PATH={DEFAULT_PATH}"],
        "Entrypoint": ["/bin/tool"],
        "User": "65532:65532",
        "Labels": {"a": "b"},
    }
    assert len(config["history"]) == 1


def test_layer_holds_the_tree_without_excluded_contents(archive: tuple[Path, Descriptor]) -> None:
    path, manifest = archive
    _, blobs = read_archive(path)
    (layer,) = json.loads(blobs[manifest.digest])["layers"]
    with tarfile.open(fileobj=io.BytesIO(blobs[layer["digest"]])) as tar:
        entries = {m.name: m for m in tar.getmembers()}
        assert list(entries) == [
            "bin",
            "bin/alias",
            "bin/hard",
            "bin/tool",
            "dev",
            "empty",
            "etc",
            "etc/hello",
        ]
        assert entries["bin/alias"].issym()
        assert entries["bin/alias"].linkname == "tool"
        assert entries["bin/tool"].islnk()
        assert entries["bin/tool"].linkname == "bin/hard"
        assert entries["bin/hard"].mode & 0o777 == 0o755
        assert all(m.mtime == 0 and m.uname == "" for m in entries.values())
        hello = tar.extractfile(entries["etc/hello"])
        assert hello is not None
        assert hello.read() == b"hello\n"


def test_layers_are_reproducible(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "rootfs")
    first = write_layer(tmp_path / "a", tree, mtime=0)
    second = write_layer(tmp_path / "b", tree, mtime=0)
    assert first == second
    assert blob_path(tmp_path / "a", first[0].digest).is_file()
    assert not list((tmp_path / "a/blobs/sha256").glob("tmp*"))


def test_unpack_applies_layers_and_whiteouts(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    lower = write_layer(layout, make_tree(tmp_path / "lower"), mtime=0)
    upper_tree = tmp_path / "upper"
    (upper_tree / "etc").mkdir(parents=True)
    (upper_tree / "etc/.wh.hello").write_text("")
    (upper_tree / "bin").mkdir()
    (upper_tree / "bin/.wh..wh..opq").write_text("")
    (upper_tree / "bin/new").write_text("new\n")
    upper = write_layer(layout, upper_tree, mtime=0)
    manifest = write_image(layout, [lower, upper], ImageConfig(cmd=("sh",)))
    out = tmp_path / "image.tar"
    archive_layout(layout, out, manifest, ["x:1"])

    rootfs = tmp_path / "unpacked"
    rootfs.mkdir()
    config = unpack_image(out, rootfs)
    assert config["config"]["Cmd"] == ["sh"]
    assert sorted(p.relative_to(rootfs).as_posix() for p in rootfs.rglob("*")) == [
        "bin",
        "bin/new",
        "dev",
        "dev/leftover",
        "empty",
        "etc",
    ]


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("busybox", "docker.io/library/busybox:latest"),
        ("busybox:1.37", "docker.io/library/busybox:1.37"),
        ("library/nginx:1.27", "docker.io/library/nginx:1.27"),
        ("registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.2"),
        ("localhost:5000/a/b", "localhost:5000/a/b:latest"),
        ("opsuite.local/podset-operator:dev", "opsuite.local/podset-operator:dev"),
        ("x@sha256:" + "0" * 64, "docker.io/library/x@sha256:" + "0" * 64),
    ],
)
def test_full_name(name: str, full: str) -> None:
    assert full_name(name) == full


def test_mirror_from_deb822_and_one_line_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPSUITE_DEBIAN_MIRROR", raising=False)
    deb822 = tmp_path / "debian.sources"
    deb822.write_text(
        "Types: deb\nURIs: http://security.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "Types: deb deb-src\n# a comment\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main contrib\n"
    )
    one_line = tmp_path / "sources.list"
    one_line.write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] https://other.example/apt stable main\n"
        "deb [arch=amd64] http://line.example/debian bookworm main non-free\n"
    )
    assert debian_mirror("bookworm", [deb822]) == "http://mirror.example/debian"
    assert debian_mirror("bookworm", [one_line]) == "http://line.example/debian"
    with pytest.raises(SystemExit):
        debian_mirror("trixie", [deb822, one_line])
    monkeypatch.setenv("OPSUITE_DEBIAN_MIRROR", "http://env.example/debian")
    assert debian_mirror("trixie", [deb822, one_line]) == "http://env.example/debian"


def test_input_hash_follows_contents_not_bytecode(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "a.py").write_text("a = 1\n")
    before = hash_inputs([pkg])
    (pkg / "__pycache__/a.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "b.pyc").write_bytes(b"\0")
    assert hash_inputs([pkg]) == before
    assert hash_inputs([pkg], "another base") != before
    (pkg / "a.py").write_text("a = 2\n")
    assert hash_inputs([pkg]) != before


def test_slim_keeps_copyright_and_links_python3(tmp_path: Path) -> None:
    root = tmp_path
    for rel in (
        "usr/share/doc/pkg/copyright",
        "usr/share/doc/pkg/changelog.gz",
        "usr/share/man/man1/x.1.gz",
        "usr/share/locale/de/LC_MESSAGES/x.mo",
        "usr/share/locale/locale.alias",
        "var/lib/apt/lists/some_Packages",
        "var/cache/apt/pkgcache.bin",
        "var/log/apt/history.log",
        "var/log/dpkg.log",
        "etc/hostname",
        "etc/resolv.conf",
        "usr/bin/python3.11",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    slim(root)
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())
    assert left == [
        "usr/bin/python3",
        "usr/bin/python3.11",
        "usr/share/doc/pkg/copyright",
        "usr/share/locale/locale.alias",
    ]
    assert os.readlink(root / "usr/bin/python3") == "python3.11"
    assert (root / "var/lib/apt/lists/partial").is_dir()


def test_a_partial_build_keeps_the_other_images_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make run` builds only the plane's workload images: images.json keeps listing the
    operator images an earlier `make images` built (the in-cluster steps load them from it),
    and drops an entry whose archive is gone."""
    monkeypatch.setattr(images, "OUT", tmp_path)
    archives = {name: tmp_path / f"{name}.tar" for name in ("busybox", "operator", "gone")}
    for archive in archives.values():
        archive.write_bytes(b"")
    images.write_listing(
        [
            Built(archives["busybox"], ["busybox:1.37"]),
            Built(archives["operator"], ["opsuite.local/podset-operator:dev"]),
            Built(archives["gone"], ["gone:1"]),
        ]
    )
    archives["gone"].unlink()
    rebuilt = tmp_path / "busybox-2.tar"
    rebuilt.write_bytes(b"")
    images.write_listing([Built(rebuilt, ["busybox:1.37"])])
    listed = {e["name"]: e["archive"] for e in json.loads((tmp_path / "images.json").read_text())}
    assert listed == {
        full_name("busybox:1.37"): str(rebuilt),
        full_name("opsuite.local/podset-operator:dev"): str(archives["operator"]),
    }


def test_the_command_line_runs_as_a_script_from_any_directory(tmp_path: Path) -> None:
    """`make images` and the docs run ``python3 hack/images.py``: the machine's Python, without
    the project's virtualenv, from anywhere; it finds its own modules (hack/oci/) and the list
    of operators (standard library only)."""
    script = Path(__file__).resolve().parents[1] / "images.py"
    for command in ("build", "verify"):
        done = subprocess.run(
            ["python3", str(script), command, "--help"],
            cwd=tmp_path,
            env={**os.environ, "COLUMNS": "200", "PYTHONPATH": ""},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert f"default: {' '.join(images.TARGETS)}" in done.stdout


def test_a_rebuilt_archive_lists_only_the_names_it_now_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator rebuilt after a change gets a new content tag in the same archive: the old
    tag is no longer in it, so it leaves images.json (hack/e2e-in-cluster.sh takes the one
    content tag listed)."""
    monkeypatch.setattr(images, "OUT", tmp_path)
    archive = tmp_path / "podset-operator.tar"
    archive.write_bytes(b"")
    images.write_listing([Built(archive, ["opsuite.local/podset-operator:aaaa"])])
    images.write_listing([Built(archive, ["opsuite.local/podset-operator:bbbb"])])
    listed = [e["name"] for e in json.loads((tmp_path / "images.json").read_text())]
    assert listed == [full_name("opsuite.local/podset-operator:bbbb")]
