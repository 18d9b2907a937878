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
UID 65532 with a read-only root filesystem. docs/images.md describes the whole.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

# The list of operators, standard library only: this script runs before the virtualenv exists
# (make doctor imports it), so it finds shared/ itself.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))
from opsuite_packaging.operators import OPERATORS

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / ".local"
BIN = LOCAL / "bin"
OUT = LOCAL / "images"
CACHE = (
    Path(
        os.environ.get("OPSUITE_CACHE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "opsuite"
    )
    / "images"
)

# --- OCI image layout ---------------------------------------------------------------------------

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EPOCH = "1970-01-01T00:00:00Z"


def full_name(name: str) -> str:
    """An image reference as containerd stores it: ``busybox:1.37`` is
    ``docker.io/library/busybox:1.37``; a name without a tag gets ``:latest``."""
    first, sep, _ = name.partition("/")
    if not sep:
        name = f"docker.io/library/{name}"
    elif "." not in first and ":" not in first and first != "localhost":
        name = f"docker.io/{name}"
    if "@" not in name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def name_annotations(name: str) -> dict[str, str]:
    """The index annotations that name an image on import: containerd's full name, and the OCI
    reference name (the tag, as BuildKit's OCI exporter writes it)."""
    name = full_name(name)
    return {ANNOTATION_CONTAINERD_NAME: name, ANNOTATION_REF_NAME: name.rsplit(":", 1)[-1]}


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor."""

    media_type: str
    digest: str
    size: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    platform: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        }
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.platform:
            out["platform"] = dict(self.platform)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Descriptor:
        return cls(
            data["mediaType"],
            data["digest"],
            int(data["size"]),
            dict(data.get("annotations") or {}),
            dict(data["platform"]) if data.get("platform") else None,
        )


def blob_path(layout: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return layout / "blobs" / algorithm / hexdigest


def write_blob(layout: Path, data: bytes, media_type: str) -> Descriptor:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = blob_path(layout, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Descriptor(media_type, digest, len(data))


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes and counts what passes through to ``sink``."""

    def __init__(self, sink: IO[bytes] | gzip.GzipFile | None) -> None:
        super().__init__()
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.size += view.nbytes
        if self.sink is not None:
            self.sink.write(view)
        return view.nbytes


def _tar_members(directory: Path) -> Iterator[Path]:
    """Every path under ``directory``, each directory followed by its contents, sorted."""
    with os.scandir(directory) as entries:
        children = sorted(entries, key=lambda e: e.name)
    for entry in children:
        yield Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _tar_members(Path(entry.path))


def write_layer(
    layout: Path,
    rootfs: Path,
    *,
    mtime: int | None = None,
    exclude: Iterable[str] = (),
) -> tuple[Descriptor, str]:
    """Write ``rootfs`` as a gzip-compressed layer blob; return its descriptor and diff ID (the
    digest of the uncompressed tar). Owners are kept numerically (build as root to keep root's
    files root's); ``mtime`` clamps every timestamp when given; ``exclude`` lists paths relative
    top-level directories whose contents are left out (the directory itself stays)."""
    skip_contents = set(exclude)
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=blobs, delete=False) as raw:
        try:
            compressed = _Hashing(raw)
            with gzip.GzipFile(fileobj=compressed, mode="wb", mtime=0, compresslevel=6) as gz:
                uncompressed = _Hashing(gz)
                with tarfile.open(
                    fileobj=uncompressed, mode="w|", format=tarfile.PAX_FORMAT
                ) as tar:
                    for path in _tar_members(rootfs):
                        rel = path.relative_to(rootfs)
                        if len(rel.parts) > 1 and rel.parts[0] in skip_contents:
                            continue
                        _add(tar, path, rel.as_posix(), mtime)
        except BaseException:
            os.unlink(raw.name)
            raise
    digest = "sha256:" + compressed.sha256.hexdigest()
    os.replace(raw.name, blob_path(layout, digest))
    os.chmod(blob_path(layout, digest), 0o644)
    diff_id = "sha256:" + uncompressed.sha256.hexdigest()
    return Descriptor(MEDIA_LAYER_GZIP, digest, compressed.size), diff_id


def _add(tar: tarfile.TarFile, path: Path, arcname: str, mtime: int | None) -> None:
    info = tar.gettarinfo(str(path), arcname)
    if info is None:  # sockets: nothing an image carries
        return
    info.uname = info.gname = ""
    if mtime is not None:
        info.mtime = min(int(info.mtime), mtime)
    if info.isreg():
        with path.open("rb") as f:
            tar.addfile(info, f)
    else:
        tar.addfile(info)


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an OCI image configuration."""

    env: Sequence[str] = (f"PATH={DEFAULT_PATH}",)
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    user: str = ""
    workdir: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Env": list(self.env)}
        if self.entrypoint:
            out["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            out["Cmd"] = list(self.cmd)
        if self.user:
            out["User"] = self.user
        if self.workdir:
            out["WorkingDir"] = self.workdir
        if self.labels:
            out["Labels"] = dict(self.labels)
        return out


PLATFORM = {"architecture": "amd64", "os": "linux"}


def write_image(
    layout: Path,
    layers: Sequence[tuple[Descriptor, str]],
    config: ImageConfig,
    *,
    created: str = EPOCH,
    comment: str = "hack/images.py",
) -> Descriptor:
    """Write an image's config and manifest blobs for ``layers`` (from :func:`write_layer`);
    return the manifest's descriptor (with the platform, for an index)."""
    config_json = {
        **PLATFORM,
        "created": created,
        "config": config.to_json(),
        "rootfs": {"type": "layers", "diff_ids": [diff_id for _, diff_id in layers]},
        "history": [{"created": created, "created_by": comment} for _ in layers],
    }
    config_desc = write_blob(layout, canonical_json(config_json), MEDIA_CONFIG)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_desc.to_json(),
        "layers": [layer.to_json() for layer, _ in layers],
    }
    desc = write_blob(layout, canonical_json(manifest), MEDIA_MANIFEST)
    return Descriptor(desc.media_type, desc.digest, desc.size, platform=PLATFORM)


def write_index(layout: Path, manifest: Descriptor, names: Sequence[str]) -> None:
    """Write ``oci-layout`` and an ``index.json`` that lists ``manifest`` once per name."""
    layout.mkdir(parents=True, exist_ok=True)
    (layout / "oci-layout").write_bytes(canonical_json({"imageLayoutVersion": "1.0.0"}))
    entries = [
        Descriptor(
            manifest.media_type,
            manifest.digest,
            manifest.size,
            {**manifest.annotations, **name_annotations(name)},
            manifest.platform,
        ).to_json()
        for name in names
    ]
    index = {"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": entries}
    (layout / "index.json").write_bytes(canonical_json(index))


def layout_blobs(layout: Path, root: Descriptor) -> list[Descriptor]:
    """``root`` and every blob it references (an index's manifests, a manifest's config and
    layers), parents first."""
    out = [root]
    if root.media_type in (
        MEDIA_INDEX,
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ):
        data = json.loads(blob_path(layout, root.digest).read_bytes())
        for child in data["manifests"]:
            out += layout_blobs(layout, Descriptor.from_json(child))
    elif root.media_type in (
        MEDIA_MANIFEST,
        "application/vnd.docker.distribution.manifest.v2+json",
    ):
        data = json.loads(blob_path(layout, root.digest).read_bytes())
        out.append(Descriptor.from_json(data["config"]))
        out += [Descriptor.from_json(layer) for layer in data["layers"]]
    return out


def archive_layout(layout: Path, archive: Path, manifest: Descriptor, names: Sequence[str]) -> None:
    """Write ``archive``: an OCI image layout tar of ``manifest`` (taken from the layout folder
    ``layout``) with only its blobs and an index naming it ``names``."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=archive.parent, prefix=".staging-"))
    try:
        write_index(staging, manifest, names)
        tmp = archive.with_name(f".{archive.name}.tmp")
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
            for member in ("oci-layout", "index.json"):
                _add(tar, staging / member, member, 0)
            seen: set[str] = set()
            for blob in layout_blobs(layout, manifest):
                if blob.digest in seen:
                    continue
                seen.add(blob.digest)
                path = blob_path(layout, blob.digest)
                info = tar.gettarinfo(str(path), "blobs/" + blob.digest.replace(":", "/"))
                info.uname = info.gname = ""
                info.uid = info.gid = 0
                info.mtime = 0
                info.mode = 0o644
                with path.open("rb") as f:
                    tar.addfile(info, f)
        os.replace(tmp, archive)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_archive(archive: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """An OCI archive's index and its blobs by digest (for tests and small images)."""
    blobs: dict[str, bytes] = {}
    index: dict[str, Any] = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            f = tar.extractfile(member)
            if f is None:
                continue
            name = member.name.removeprefix("./")
            if name == "index.json":
                index = json.loads(f.read())
            elif name.startswith("blobs/"):
                _, algorithm, hexdigest = name.split("/")
                blobs[f"{algorithm}:{hexdigest}"] = f.read()
    return index, blobs


def unpack_image(archive: Path, dest: Path) -> dict[str, Any]:
    """Apply the layers of the archive's (first) image to ``dest`` in order, honouring OCI
    whiteouts; return the image configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="tar")
        layout = Path(tmp)
        index = json.loads((layout / "index.json").read_bytes())
        desc = Descriptor.from_json(index["manifests"][0])
        while desc.media_type == MEDIA_INDEX:
            children = json.loads(blob_path(layout, desc.digest).read_bytes())["manifests"]
            desc = Descriptor.from_json(
                next(c for c in children if (c.get("platform") or {}).get("os", "linux") == "linux")
            )
        manifest = json.loads(blob_path(layout, desc.digest).read_bytes())
        for layer in manifest["layers"]:
            _apply_layer(blob_path(layout, layer["digest"]), dest)
        config: dict[str, Any] = json.loads(
            blob_path(layout, manifest["config"]["digest"]).read_bytes()
        )
        return config


def _apply_layer(blob: Path, dest: Path) -> None:
    with tarfile.open(blob) as tar:
        keep: list[tarfile.TarInfo] = []
        for member in tar.getmembers():
            parent, _, base = member.name.rstrip("/").rpartition("/")
            if base == ".wh..wh..opq":
                target = dest / parent
                if target.is_dir():
                    for child in target.iterdir():
                        _remove(child)
            elif base.startswith(".wh."):
                _remove(dest / parent / base.removeprefix(".wh."))
            else:
                keep.append(member)
        tar.extractall(dest, members=keep, filter="tar", numeric_owner=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


# --- helpers -------------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f">> {message}", flush=True)


def run(cmd: Sequence[str | Path], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], check=True, text=True, **kwargs)


def as_root(cmd: Sequence[str | Path]) -> list[str]:
    """``cmd``, through sudo unless this already runs as root."""
    return [str(c) for c in cmd] if os.geteuid() == 0 else ["sudo", *map(str, cmd)]


def hash_inputs(paths: Iterable[Path], *extra: str) -> str:
    """A digest of the files under ``paths`` (names and contents; bytecode left out)."""
    h = hashlib.sha256()
    for item in extra:
        h.update(item.encode() + b"\0")
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += [
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
            ]
        elif path.exists():
            files.append(path)
    for f in sorted(set(files)):
        name = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
        h.update(name.as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two builds at once wait for each other)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def apt_sources() -> list[Path]:
    return [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]


def debian_mirror(suite: str = "bookworm", sources: Sequence[Path] | None = None) -> str:
    """The machine's Debian mirror for ``suite`` (main), from the apt sources (one-line and
    deb822 formats); else $OPSUITE_DEBIAN_MIRROR."""
    if sources is None:
        sources = apt_sources()
    for source in sources:
        if not source.is_file():
            continue
        text = source.read_text(errors="replace")
        if source.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
                if (
                    "deb" in fields.get("types", "").split()
                    and suite in fields.get("suites", "").split()
                    and "main" in fields.get("components", "").split()
                    and fields.get("enabled", "yes").lower() != "no"
                ):
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if (
                    len(words) >= 4
                    and words[0] == "deb"
                    and words[2] == suite
                    and "main" in words[3:]
                ):
                    return words[1]
    mirror = os.environ.get("OPSUITE_DEBIAN_MIRROR", "")
    if not mirror:
        sys.exit(f"no apt source for Debian {suite} main: set OPSUITE_DEBIAN_MIRROR")
    return mirror


# --- the images -------------------------------------------------------------------------------


@dataclass
class Built:
    """An image archive and the names it carries."""

    archive: Path
    names: list[str]


BASE_SUITE = "bookworm"
BASE_PACKAGES = (
    "python3.11",
    "python3.11-venv",
    "python3-distutils",
    "python3-pip-whl",
    "python3-setuptools-whl",
    "ca-certificates",
)
# Bump when the slimming or the configuration below changes (part of the cache key).
BASE_RECIPE = "1"
BASE_NAME = "opsuite.local/python:3.11-bookworm"
# What a runtime bind-mounts or creates: left out of the base's layer.
BASE_EXCLUDE = ("dev", "proc", "sys", "run", "tmp")


def slim(rootfs: Path) -> None:
    """Remove what an image does not need from a debootstrapped tree: documentation (copyright
    files stay), manuals, translations, apt's lists and caches, logs, and the host files
    debootstrap copied in."""
    doc = rootfs / "usr/share/doc"
    for path in doc.glob("*"):
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                if child.name != "copyright":
                    _remove(child)
        else:
            _remove(path)
    for rel in ("usr/share/man", "usr/share/info", "usr/share/groff", "usr/share/lintian"):
        _remove(rootfs / rel)
    for path in (rootfs / "usr/share/locale").glob("*"):
        if path.name != "locale.alias":
            _remove(path)
    for rel in ("var/lib/apt/lists", "var/cache/apt", "etc/hostname", "etc/resolv.conf"):
        _remove(rootfs / rel)
    for pattern in ("var/cache/debconf/*-old", "var/lib/dpkg/*-old", "tmp/*", "root/.cache"):
        for path in rootfs.glob(pattern):
            _remove(path)
    for path in (rootfs / "var/log").rglob("*"):
        if path.is_file() or path.is_symlink():
            path.unlink()
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    # Debian's python3.11 package alone has no "python3" command (the python3 package has);
    # the Dockerfile's scripts call python3.
    python3 = rootfs / "usr/bin/python3"
    if not python3.exists() and not python3.is_symlink():
        python3.symlink_to("python3.11")


def build_base(force: bool = False) -> tuple[Path, Descriptor]:
    """The Python base as an OCI layout folder in the cache; return it and its manifest."""
    key = hash_inputs([], BASE_SUITE, *BASE_PACKAGES, BASE_RECIPE, ",".join(BASE_EXCLUDE))[:16]
    home = CACHE / f"python-base-{key}"
    layout = home / "layout"
    with locked(CACHE / "python-base.lock"):
        if force or not (home / ".complete").exists():
            mirror = debian_mirror(BASE_SUITE)
            tmp = home.with_name(home.name + ".tmp")
            run(as_root(["rm", "-rf", tmp, home]))
            tmp.mkdir(parents=True)
            rootfs = tmp / "rootfs"
            log(f"debootstrap {BASE_SUITE} ({', '.join(BASE_PACKAGES)})")
            start = time.monotonic()
            run(
                as_root(
                    [
                        "debootstrap",
                        "--variant=minbase",
                        "--include=" + ",".join(BASE_PACKAGES),
                        BASE_SUITE,
                        rootfs,
                        mirror,
                    ]
                ),
                stdout=subprocess.DEVNULL,
            )
            log(f"debootstrap took {time.monotonic() - start:.0f} s")
            slim(rootfs)
            layer = write_layer(tmp / "layout", rootfs, exclude=BASE_EXCLUDE)
            config = ImageConfig(
                env=(f"PATH={DEFAULT_PATH}", "LANG=C.UTF-8"),
                cmd=("python3",),
                labels={
                    "org.opencontainers.image.title": "python",
                    "org.opencontainers.image.description": (
                        f"Python 3.11 from Debian {BASE_SUITE} packages (hack/images.py)"
                    ),
                },
            )
            manifest = write_image(tmp / "layout", [layer], config, comment="debootstrap")
            write_index(tmp / "layout", manifest, [BASE_NAME])
            run(as_root(["rm", "-rf", rootfs]))
            (tmp / ".complete").touch()
            tmp.rename(home)
            log(f"base image {BASE_NAME}: {layer[0].size / 2**20:.0f} MiB compressed")
    index = json.loads((layout / "index.json").read_bytes())
    return layout, Descriptor.from_json(index["manifests"][0])


BUSYBOX_NAMES = ["busybox:1.37", "busybox:latest"]
# Images the e2e tests and benchmarks name for pods but need only as "something that runs":
# busybox, with a command that waits and stops at once on SIGTERM (nginx), or a shell (alpine).
STANDINS: dict[str, tuple[list[str], ImageConfig]] = {
    "nginx": (
        ["nginx:latest", "nginx:1.27"],
        ImageConfig(
            cmd=("sh", "-c", "trap 'exit 0' TERM INT; sleep 2147483647 & wait"),
            labels={"opsuite.dev/stand-in": "busybox waiting for SIGTERM, not nginx"},
        ),
    ),
    "alpine": (
        ["alpine:latest", "alpine:3"],
        ImageConfig(cmd=("sh",), labels={"opsuite.dev/stand-in": "busybox, not alpine"}),
    ),
}
BUSYBOX_BINARY = Path("/bin/busybox")


def busybox_rootfs(rootfs: Path) -> None:
    """A busybox tree: the static binary, a link for every applet, passwd and group files."""
    binary = rootfs / "bin/busybox"
    binary.parent.mkdir(parents=True)
    shutil.copy2(BUSYBOX_BINARY, binary)
    applets = run([BUSYBOX_BINARY, "--list-full"], capture_output=True).stdout.split()
    for applet in applets:
        link = rootfs / applet
        if link == binary:
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to("/bin/busybox")
    for d in ("etc", "root", "home", "var/spool/mail", "usr/sbin"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    (rootfs / "root").chmod(0o700)
    tmp = rootfs / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    (rootfs / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
    )
    (rootfs / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")


def build_busybox(force: bool = False) -> list[Built]:
    """busybox and the stand-ins, from one layer."""
    inputs = hash_inputs([BUSYBOX_BINARY, Path(__file__)])[:16]
    archives = {"busybox": OUT / "busybox.tar"} | {n: OUT / f"{n}.tar" for n in STANDINS}
    stamp = OUT / ".stamps/busybox"
    built = [Built(archives["busybox"], BUSYBOX_NAMES)]
    built += [Built(archives[n], names) for n, (names, _) in STANDINS.items()]
    if not force and _fresh(stamp, inputs, archives.values()):
        return built
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs, layout = Path(tmp) / "rootfs", Path(tmp) / "layout"
        busybox_rootfs(rootfs)
        layer = write_layer(layout, rootfs, mtime=0)
        base_cfg = ImageConfig(cmd=("sh",))
        manifest = write_image(layout, [layer], base_cfg)
        archive_layout(layout, archives["busybox"], manifest, BUSYBOX_NAMES)
        for name, (names, cfg) in STANDINS.items():
            archive_layout(layout, archives[name], write_image(layout, [layer], cfg), names)
    _stamp(stamp, inputs)
    log(f"busybox: {archives['busybox'].stat().st_size / 2**20:.1f} MiB")
    return built


PAUSE_NAMES = ["registry.k8s.io/pause:3.10.2"]


def build_pause(force: bool = False) -> list[Built]:
    source = ROOT / "hack/image/pause.c"
    archive = OUT / "pause.tar"
    inputs = hash_inputs([source, Path(__file__)])[:16]
    stamp = OUT / ".stamps/pause"
    built = [Built(archive, PAUSE_NAMES)]
    if not force and _fresh(stamp, inputs, [archive]):
        return built
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs, layout = Path(tmp) / "rootfs", Path(tmp) / "layout"
        rootfs.mkdir()
        cc = os.environ.get("CC", "gcc")
        run([cc, "-static", "-Os", "-s", "-Wall", "-Wextra", "-o", rootfs / "pause", source])
        layer = write_layer(layout, rootfs, mtime=0)
        # The upstream image's user: 65535 (no passwd needed, numeric).
        config = ImageConfig(entrypoint=("/pause",), user="65535:65535")
        archive_layout(layout, archive, write_image(layout, [layer], config), PAUSE_NAMES)
    _stamp(stamp, inputs)
    log(f"pause: {archive.stat().st_size / 2**10:.0f} KiB")
    return built


def _fresh(stamp: Path, inputs: str, archives: Iterable[Path]) -> bool:
    return (
        stamp.exists() and stamp.read_text().strip() == inputs and all(a.exists() for a in archives)
    )


def _stamp(stamp: Path, inputs: str) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(inputs + "\n")


# --- operator images (BuildKit) ----------------------------------------------------------------

TARGETS = [op.image for op in OPERATORS]
OPERATOR_REGISTRY = "opsuite.local"
# Bump when the build command below changes (part of the operator images' input hash).
OPERATOR_RECIPE = "1"
CA_BUNDLES = [Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt")]


def operator_inputs(base: Descriptor) -> str:
    """A digest of everything the Dockerfile copies or runs, and of the base."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [ROOT / p["from"] / p["include"] for p in pyproject["tool"]["poetry"]["packages"]]
    paths = [
        ROOT / "Dockerfile",
        ROOT / ".dockerignore",
        ROOT / "pyproject.toml",
        ROOT / "poetry.lock",
        ROOT / "README.md",
        ROOT / "hack/image",
        *packages,
    ]
    return hash_inputs(paths, base.digest, OPERATOR_RECIPE)


@contextlib.contextmanager
def buildkitd(root: Path) -> Iterator[str]:
    """A temporary buildkitd (OCI worker, runc) on its own socket; yield its address. It is
    stopped when the block ends, however it ends."""
    sock_dir = Path(tempfile.mkdtemp(prefix="opsuite-buildkit-"))
    addr = f"unix://{sock_dir}/buildkitd.sock"
    root.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = as_root(
        [
            BIN / "buildkitd",
            "--root",
            root,
            "--addr",
            addr,
            "--oci-worker=true",
            "--containerd-worker=false",
            "--oci-worker-binary",
            (BIN / "runc").resolve(),
        ]
    )
    with (OUT / "buildkitd.log").open("w") as logfile:
        proc = subprocess.Popen(
            cmd, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"buildkitd exited ({proc.returncode}): see {logfile.name}")
                ready = subprocess.run(
                    [str(BIN / "buildctl"), "--addr", addr, "debug", "workers"],
                    capture_output=True,
                )
                if ready.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"buildkitd did not answer in 60 s: see {logfile.name}")
                time.sleep(0.2)
            yield addr
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            shutil.rmtree(sock_dir, ignore_errors=True)


def build_operators(
    base_layout: Path, base: Descriptor, force: bool = False, targets: Sequence[str] = TARGETS
) -> list[Built]:
    inputs = operator_inputs(base)
    tag = inputs[:12]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wanted = {
        t: Built(
            OUT / f"{t}.tar", [f"{OPERATOR_REGISTRY}/{t}:dev", f"{OPERATOR_REGISTRY}/{t}:{tag}"]
        )
        for t in targets
    }
    todo = [
        t for t in targets if force or not _fresh(OUT / f".stamps/{t}", inputs, [wanted[t].archive])
    ]
    if not todo:
        return list(wanted.values())
    ca = next((c for c in CA_BUNDLES if c.exists()), None)
    with locked(CACHE / "buildkit.lock"), buildkitd(CACHE / "buildkit") as addr:
        for target in todo:
            log(f"buildctl build --opt target={target}")
            start = time.monotonic()
            with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
                out = Path(tmp) / "layout"
                cmd: list[str | Path] = [
                    BIN / "buildctl",
                    "--addr",
                    addr,
                    "build",
                    "--progress=plain",
                    "--frontend",
                    "dockerfile.v0",
                    "--local",
                    f"context={ROOT}",
                    "--local",
                    f"dockerfile={ROOT}",
                    "--opt",
                    f"target={target}",
                    "--opt",
                    f"build-arg:PYTHON_IMAGE={BASE_NAME}",
                    "--opt",
                    f"build-arg:VERSION={version}",
                    "--oci-layout",
                    f"base={base_layout}",
                    "--opt",
                    f"context:{BASE_NAME}=oci-layout://base@{base.digest}",
                    "--output",
                    f"type=oci,tar=false,dest={out}",
                ]
                if ca is not None:
                    cmd += ["--secret", f"id=ca,src={ca}"]
                result = subprocess.run(
                    [str(c) for c in cmd], capture_output=True, text=True, check=False
                )
                (OUT / f"{target}.build.log").write_text(result.stdout + result.stderr)
                if result.returncode != 0:
                    sys.stderr.write(result.stderr[-6000:])
                    raise RuntimeError(f"building {target} failed: see {OUT}/{target}.build.log")
                run(as_root(["chown", "-R", f"{os.getuid()}:{os.getgid()}", out]))
                index = json.loads((out / "index.json").read_bytes())
                manifest = Descriptor.from_json(index["manifests"][0])
                manifest = Descriptor(
                    manifest.media_type, manifest.digest, manifest.size, platform=manifest.platform
                )
                archive_layout(out, wanted[target].archive, manifest, wanted[target].names)
            _stamp(OUT / f".stamps/{target}", inputs)
            size = wanted[target].archive.stat().st_size / 2**20
            log(f"{target}: {time.monotonic() - start:.0f} s, {size:.0f} MiB")
    return list(wanted.values())


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
        if args.force or not _fresh(stamp, base.digest, [archive]):
            archive_layout(base_layout, archive, base, [BASE_NAME])
            _stamp(stamp, base.digest)
        images.append(Built(archive, [BASE_NAME]))
    if wanted("busybox"):
        images += build_busybox(args.force)
    if wanted("pause"):
        images += build_pause(args.force)
    if targets:
        images += build_operators(base_layout, base, args.force, targets)
    write_listing(images)
    for image in images:
        size = image.archive.stat().st_size / 2**20
        log(f"{image.archive.relative_to(ROOT)} ({size:.1f} MiB): {', '.join(image.names)}")
    log(f"images built in {time.monotonic() - start:.1f} s")


def write_listing(images: Sequence[Built]) -> None:
    """images.json: the images just built, and those of an earlier build that still exist
    (a build of some images, such as the plane's workload images, keeps the others listed)."""
    listing = OUT / "images.json"
    built = {full_name(name): str(image.archive) for image in images for name in image.names}
    earlier = json.loads(listing.read_text()) if listing.exists() else []
    kept = {
        entry["name"]: entry["archive"]
        for entry in earlier
        if entry["name"] not in built and Path(entry["archive"]).exists()
    }
    entries = [{"name": name, "archive": archive} for name, archive in {**kept, **built}.items()]
    listing.write_text(json.dumps(entries, indent=2) + "\n")


def verify(args: argparse.Namespace) -> None:
    """Run each operator image's entrypoint with --help under runc: UID 65532 from the image,
    read-only root filesystem, no network."""
    runc = BIN / "runc"
    for target in args.targets or TARGETS:
        archive = OUT / f"{target}.tar"
        with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
            bundle = Path(tmp)
            rootfs = bundle / "rootfs"
            rootfs.mkdir()
            image = unpack_image(archive, rootfs)["config"]
            run([runc, "spec"], cwd=bundle)
            spec = json.loads((bundle / "config.json").read_text())
            uid, _, gid = image.get("User", "0:0").partition(":")
            spec["process"].update(
                terminal=False,
                args=[*image.get("Entrypoint", []), "--help"],
                env=image.get("Env", []),
                cwd=image.get("WorkingDir") or "/",
                user={"uid": int(uid), "gid": int(gid or uid)},
            )
            spec["root"]["readonly"] = True
            (bundle / "config.json").write_text(json.dumps(spec))
            result = subprocess.run(
                as_root(
                    [
                        runc,
                        "--root",
                        bundle / "state",
                        "run",
                        "--bundle",
                        bundle,
                        f"verify-{target}-{os.getpid()}",
                    ]
                ),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            ok = result.returncode == 0 and result.stdout.startswith(f"usage: {target} ")
            log(f"{target} --help as {uid}:{gid} on a read-only root: {'ok' if ok else 'FAILED'}")
            if not ok:
                sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
                sys.exit(1)


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
