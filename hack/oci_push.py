"""Push an image from an OCI archive (hack/images.py's, BuildKit's), or a one-file OCI artifact,
to a registry over the distribution API (no Docker, no crane, no skopeo, no oras here): plain
HTTP to a loopback registry (the local plane's, which the real node's containerd pulls from),
HTTPS otherwise, with the registry's bearer-token challenge answered with ``OCI_USERNAME`` and
``OCI_PASSWORD`` when set (anonymously otherwise).

    python3 hack/oci_push.py artifacthub-repo REGISTRY/REPOSITORY FILE
    python3 hack/oci_push.py digest REGISTRY/REPOSITORY:TAG

The first pushes FILE (``artifacthub-repo.yml``) as the ``artifacthub.io`` tag of a chart's OCI
repository with Artifact Hub's media types, reads it back and checks it; the second prints the
digest the registry serves the tag as (what the release signs).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from oci.archive import read_archive

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
ARTIFACTHUB_TAG = "artifacthub.io"
"""The tag of a chart's OCI repository where Artifact Hub reads its repository metadata."""
ARTIFACTHUB_CONFIG = "application/vnd.cncf.artifacthub.config.v1+yaml"
ARTIFACTHUB_LAYER = "application/vnd.cncf.artifacthub.repository-metadata.layer.v1.yaml"
"""The media types Artifact Hub reads that artifact with (an empty config, one YAML layer)."""
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
_tokens: dict[str, str] = {}
"""Bearer tokens by the challenge that asked for them."""


def split_reference(reference: str) -> tuple[str, str, str]:
    """``host:port/repo/name:tag`` as (registry, repository, tag)."""
    registry, sep, rest = reference.partition("/")
    if not sep or ("." not in registry and ":" not in registry and registry != "localhost"):
        raise ValueError(f"{reference}: name the registry (host:port/repository:tag)")
    repository, sep, tag = rest.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"{reference}: name a tag")
    return registry, repository, tag


def base_url(registry: str) -> str:
    """The registry's API root: plain HTTP on loopback, HTTPS elsewhere."""
    host = re.sub(r":\d+$", "", registry)
    return f"{'http' if host in LOOPBACK else 'https'}://{registry}"


def _token(challenge: str) -> str:
    """A bearer token for a ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``."""
    if challenge not in _tokens:
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        query = urllib.parse.urlencode({k: v for k, v in params.items() if k != "realm"})
        request = urllib.request.Request(f"{params['realm']}?{query}")
        user, password = os.environ.get("OCI_USERNAME"), os.environ.get("OCI_PASSWORD")
        if user and password:
            basic = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {basic}")
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        _tokens[challenge] = answer.get("token") or answer["access_token"]
    return _tokens[challenge]


def _request(
    method: str, url: str, body: bytes | None = None, media_type: str = "", accept: str = ""
) -> Any:
    request = urllib.request.Request(url, data=body, method=method)
    if media_type:
        request.add_header("Content-Type", media_type)
    if accept:
        request.add_header("Accept", accept)
    try:
        return urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as error:
        challenge = error.headers.get("WWW-Authenticate", "")
        if error.code != 401 or not challenge.startswith("Bearer "):
            raise
        request.add_header("Authorization", f"Bearer {_token(challenge)}")
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
    base = base_url(registry)
    _push_tree(base, repository, descriptor, blobs)
    put_manifest(base, repository, tag, blobs[descriptor["digest"]], descriptor)
    return str(descriptor["digest"])


def retag(reference: str, tag: str) -> str:
    """Point ``tag`` of ``reference``'s repository at the manifest ``reference`` names (as
    ``crane tag`` does: the blobs are there already); return its digest."""
    registry, repository, source = split_reference(reference)
    base = base_url(registry)
    url = f"{base}/v2/{repository}/manifests/{source}"
    with _request("GET", url, accept=", ".join((*MANIFEST_TYPES, *INDEX_TYPES))) as response:
        data = response.read()
        media_type = response.headers["Content-Type"]
    put_manifest(base, repository, tag, data, {"mediaType": media_type})
    return _digest(data)


def _digest(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def push_artifact(
    reference: str, content: bytes, title: str, config_type: str, layer_type: str
) -> str:
    """Push ``content`` as the one layer (named ``title``) of an OCI artifact with an empty
    config, as ``oras push REF --config /dev/null:CONFIG_TYPE FILE:LAYER_TYPE`` does; return
    the manifest's digest."""
    registry, repository, tag = split_reference(reference)
    base = base_url(registry)
    config = b""
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPES[0],
        "config": {"mediaType": config_type, "digest": _digest(config), "size": len(config)},
        "layers": [
            {
                "mediaType": layer_type,
                "digest": _digest(content),
                "size": len(content),
                "annotations": {"org.opencontainers.image.title": title},
            }
        ],
    }
    for blob in (config, content):
        _push_blob(base, repository, _digest(blob), blob)
    data = json.dumps(manifest, separators=(",", ":")).encode()
    put_manifest(base, repository, tag, data, {"mediaType": MANIFEST_TYPES[0]})
    return _digest(data)


def manifest_digest(reference: str) -> str:
    """The digest the registry serves ``reference``'s tag as (an index for a multi-platform
    image), as a client pulling it by tag would get it."""
    registry, repository, tag = split_reference(reference)
    url = f"{base_url(registry)}/v2/{repository}/manifests/{tag}"
    with _request("GET", url, accept=", ".join(INDEX_TYPES + MANIFEST_TYPES)) as response:
        body = response.read()
        served = response.headers.get("Docker-Content-Digest")
    digest = _digest(body)
    if served and served != digest:
        raise ValueError(f"{reference}: the registry says {served}, the manifest is {digest}")
    return digest


def pull_layer(reference: str, layer_type: str) -> bytes:
    """The first layer of ``layer_type`` of the manifest ``reference`` names."""
    registry, repository, tag = split_reference(reference)
    base = base_url(registry)
    url = f"{base}/v2/{repository}/manifests/{tag}"
    with _request("GET", url, accept=MANIFEST_TYPES[0]) as response:
        manifest = json.loads(response.read())
    layer = next(layer for layer in manifest["layers"] if layer["mediaType"] == layer_type)
    with _request("GET", f"{base}/v2/{repository}/blobs/{layer['digest']}") as response:
        data: bytes = response.read()
    if _digest(data) != layer["digest"]:
        raise ValueError(f"{reference}: layer digest mismatch")
    return data


def push_artifacthub_repo(repository: str, path: Path) -> str:
    """``path`` as Artifact Hub's repository metadata of ``repository`` (host/repo), read back
    and compared; return the manifest's digest."""
    reference = f"{repository}:{ARTIFACTHUB_TAG}"
    content = path.read_bytes()
    digest = push_artifact(reference, content, path.name, ARTIFACTHUB_CONFIG, ARTIFACTHUB_LAYER)
    if pull_layer(reference, ARTIFACTHUB_LAYER) != content:
        raise RuntimeError(f"{reference}: what the registry serves is not {path}")
    return digest


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    artifacthub = commands.add_parser("artifacthub-repo", help="push artifacthub-repo.yml")
    artifacthub.add_argument("repository", help="host[:port]/repository of a chart")
    artifacthub.add_argument("file", type=Path)
    digest = commands.add_parser("digest", help="print the digest a tag is served as")
    digest.add_argument("reference", help="host[:port]/repository:tag")
    args = parser.parse_args(argv)
    if args.command == "digest":
        print(manifest_digest(args.reference))
        return
    pushed = push_artifacthub_repo(args.repository, args.file)
    print(f"pushed {args.file} as {args.repository}:{ARTIFACTHUB_TAG} ({pushed})")


if __name__ == "__main__":
    main()
