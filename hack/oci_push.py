"""Push an image from an OCI archive (hack/images.py's, BuildKit's) to a registry over the
distribution API, on plain HTTP: the local plane's registry, which the real node's containerd
pulls from (no Docker, no crane, no skopeo here)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from images import read_archive

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


def split_reference(reference: str) -> tuple[str, str, str]:
    """``host:port/repo/name:tag`` as (registry, repository, tag)."""
    registry, sep, rest = reference.partition("/")
    if not sep or ("." not in registry and ":" not in registry and registry != "localhost"):
        raise ValueError(f"{reference}: name the registry (host:port/repository:tag)")
    repository, sep, tag = rest.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"{reference}: name a tag")
    return registry, repository, tag


def _request(method: str, url: str, body: bytes | None = None, media_type: str = "") -> Any:
    request = urllib.request.Request(url, data=body, method=method)
    if media_type:
        request.add_header("Content-Type", media_type)
    return urllib.request.urlopen(request, timeout=60)


def _push_blob(base: str, repository: str, digest: str, data: bytes) -> None:
    try:
        _request("HEAD", f"{base}/v2/{repository}/blobs/{digest}").close()
        return  # already there
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
    with _request("POST", f"{base}/v2/{repository}/blobs/uploads/", b"") as response:
        location = urllib.parse.urljoin(f"{base}/", response.headers["Location"])
    separator = "&" if "?" in location else "?"
    url = f"{location}{separator}digest={urllib.parse.quote(digest)}"
    _request("PUT", url, data, "application/octet-stream").close()


def _push_tree(
    base: str, repository: str, descriptor: Mapping[str, Any], blobs: Mapping[str, bytes]
) -> None:
    """Push the blobs ``descriptor`` references, children before parents; index children are
    put by digest (the parent's own manifest is left to the caller)."""
    data = blobs[descriptor["digest"]]
    media_type = descriptor["mediaType"]
    if media_type in INDEX_TYPES:
        for child in json.loads(data)["manifests"]:
            _push_tree(base, repository, child, blobs)
            put_manifest(base, repository, child["digest"], blobs[child["digest"]], child)
    elif media_type in MANIFEST_TYPES:
        manifest = json.loads(data)
        for blob in [manifest["config"], *manifest["layers"]]:
            _push_blob(base, repository, blob["digest"], blobs[blob["digest"]])


def put_manifest(
    base: str, repository: str, reference: str, data: bytes, descriptor: Mapping[str, Any]
) -> None:
    """PUT a manifest or index under a tag or its digest."""
    url = f"{base}/v2/{repository}/manifests/{reference}"
    _request("PUT", url, data, descriptor["mediaType"]).close()


def push(archive: Path, reference: str) -> str:
    """Push the archive's (first) image as ``reference``; return its digest."""
    registry, repository, tag = split_reference(reference)
    index, blobs = read_archive(archive)
    descriptor = index["manifests"][0]
    base = f"http://{registry}"
    _push_tree(base, repository, descriptor, blobs)
    put_manifest(base, repository, tag, blobs[descriptor["digest"]], descriptor)
    return str(descriptor["digest"])


def retag(reference: str, tag: str) -> str:
    """Point ``tag`` of ``reference``'s repository at the manifest ``reference`` names (as
    ``crane tag`` does: the blobs are there already); return its digest."""
    registry, repository, source = split_reference(reference)
    base = f"http://{registry}"
    request = urllib.request.Request(f"{base}/v2/{repository}/manifests/{source}")
    request.add_header("Accept", ", ".join((*MANIFEST_TYPES, *INDEX_TYPES)))
    with urllib.request.urlopen(request, timeout=60) as response:
        data = response.read()
        media_type = response.headers["Content-Type"]
        digest = str(response.headers["Docker-Content-Digest"])
    put_manifest(base, repository, tag, data, {"mediaType": media_type})
    return digest
