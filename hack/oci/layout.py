"""The OCI image layout: content descriptors, blobs stored by digest, image configurations,
manifests and the index that names them (github.com/opencontainers/image-spec)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EPOCH = "1970-01-01T00:00:00Z"
PLATFORM = {"architecture": "amd64", "os": "linux"}


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


def write_image(
    layout: Path,
    layers: Sequence[tuple[Descriptor, str]],
    config: ImageConfig,
    *,
    created: str = EPOCH,
    comment: str = "hack/images.py",
) -> Descriptor:
    """Write an image's config and manifest blobs for ``layers`` (from
    :func:`oci.layer.write_layer`); return the manifest's descriptor (with the platform, for an
    index). ``comment`` is each layer's history entry: the images' digests depend on it."""
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


def index_manifest(layout: Path) -> Descriptor:
    """The first manifest ``layout``'s index lists."""
    index = json.loads((layout / "index.json").read_bytes())
    return Descriptor.from_json(index["manifests"][0])


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
