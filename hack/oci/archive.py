"""An image as one OCI image layout tar file (what ``ctr images import`` and hack/oci_push.py
read), written from a layout folder with only that image's blobs, and read back."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oci.layer import add_member, apply_layer
from oci.layout import MEDIA_INDEX, Descriptor, blob_path, index_manifest, layout_blobs, write_index


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
                add_member(tar, staging / member, member, 0)
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
        desc = index_manifest(layout)
        while desc.media_type == MEDIA_INDEX:
            children = json.loads(blob_path(layout, desc.digest).read_bytes())["manifests"]
            desc = Descriptor.from_json(
                next(c for c in children if (c.get("platform") or {}).get("os", "linux") == "linux")
            )
        manifest = json.loads(blob_path(layout, desc.digest).read_bytes())
        for layer in manifest["layers"]:
            apply_layer(blob_path(layout, layer["digest"]), dest)
        config: dict[str, Any] = json.loads(
            blob_path(layout, manifest["config"]["digest"]).read_bytes()
        )
        return config
