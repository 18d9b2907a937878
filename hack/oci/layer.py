"""Image layers: a directory tree written as a reproducible gzip-compressed tar blob, and a
layer applied onto a tree with OCI whiteouts."""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from oci.layout import MEDIA_LAYER_GZIP, Descriptor, blob_path


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
                        add_member(tar, path, rel.as_posix(), mtime)
        except BaseException:
            os.unlink(raw.name)
            raise
    digest = "sha256:" + compressed.sha256.hexdigest()
    os.replace(raw.name, blob_path(layout, digest))
    os.chmod(blob_path(layout, digest), 0o644)
    diff_id = "sha256:" + uncompressed.sha256.hexdigest()
    return Descriptor(MEDIA_LAYER_GZIP, digest, compressed.size), diff_id


def add_member(tar: tarfile.TarFile, path: Path, arcname: str, mtime: int | None) -> None:
    """Add ``path`` as ``arcname`` with numeric owners only; ``mtime`` clamps its timestamp."""
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


def apply_layer(blob: Path, dest: Path) -> None:
    """Extract the layer ``blob`` onto ``dest``, honouring its whiteouts (a ``.wh.<name>`` removes
    ``<name>``, ``.wh..wh..opq`` empties its directory) first."""
    with tarfile.open(blob) as tar:
        keep: list[tarfile.TarInfo] = []
        for member in tar.getmembers():
            parent, _, base = member.name.rstrip("/").rpartition("/")
            if base == ".wh..wh..opq":
                target = dest / parent
                if target.is_dir():
                    for child in target.iterdir():
                        remove(child)
            elif base.startswith(".wh."):
                remove(dest / parent / base.removeprefix(".wh."))
            else:
                keep.append(member)
        tar.extractall(dest, members=keep, filter="tar", numeric_owner=True)


def remove(path: Path) -> None:
    """Remove a file, link or directory tree, if there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
