"""Pod watch streams in protobuf, decoded into the dicts a JSON watch gives.

controller-runtime asks the API server for protobuf for every built-in type; opsuite does for
pods. The API server streams pods much faster in protobuf than in JSON (bench/README.md):
encoding JSON is most of an initial listing's time, on the API server's side. A watch declared
with ``fields`` (:meth:`opsuite_common.manager.Manager.watch`) of a resource in
:data:`MESSAGES` is streamed in protobuf. Each object is parsed (upb, in C) into a *view*, a
message type holding only the declared fields, so that the containers, volumes and probes of a
pod are skipped, not built; the view is turned into a dict shaped as the JSON object is (same
keys, RFC 3339 timestamps, base64 bytes) by a function written for those fields. A watch's
paged listings (where streaming lists are not to be had) and an API server that answers JSON
still give whole JSON objects: the stores' transforms take either.

What the dicts hold: ``apiVersion``, ``kind``, the metadata of
:data:`~opsuite_common.protofields.OBJECT_META` and the declared fields. Scalars are kept when
the message carries them, except empty strings (JSON's ``omitempty`` drops them; Go's protobuf
encoder writes them); lists and maps when not empty; messages when present; a zero timestamp is
absent (JSON's null). Strings are text even when not UTF-8 (proto2 does not check it): what is
not is replaced by U+FFFD, as in the JSON encoding.

Any failure to decode a frame (:class:`~opsuite_common.protofields.ProtobufError`: a time out
of the range Python formats, a map key that is not UTF-8) ends that watch stream, which goes on
in JSON from then on (:mod:`opsuite_common.kopfwatch.streams`), as it would
for an API server that answers JSON: the Accept header asks for protobuf, else JSON, as
client-go's does.
"""

from __future__ import annotations

from typing import Protocol
from urllib.parse import urlsplit

from opsuite_common.protofields import Fields
from opsuite_common.store import JSON

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
WATCH_CONTENT_TYPE = f"{CONTENT_TYPE};stream=watch"
ACCEPT = f"{CONTENT_TYPE}, application/json"
"""What a protobuf watch asks for: protobuf, else JSON (client-go's Accept for built-in
types), so that an API server or proxy that cannot encode protobuf answers JSON."""
MESSAGES = {"pods": "k8s.io.api.core.v1.Pod"}
"""Core (``/api/v1``) resources watched in protobuf, by plural. Pods only: a pod's JSON is
mostly its spec, which no operator reads; for small objects (ConfigMaps of a few hundred
bytes) orjson builds the dicts faster than the decoder, and ConfigMapSync started no faster in
protobuf (bench/README.md)."""


class Decoder(Protocol):
    """Turns the frames of one resource's protobuf watch into JSON watch events."""

    def decode(self, frame: bytes) -> JSON:
        """One frame (without its length prefix) as ``{"type": ..., "object": ...}``."""
        ...

    def status(self, body: bytes) -> JSON | None:
        """An error answer's Status (a watch that asks for protobuf gets its errors in
        protobuf too) as its JSON dict; None when it is not one."""
        ...


def decoder(plural: str, fields: Fields) -> Decoder:
    """The decoder of ``plural``'s watch (a key of :data:`MESSAGES`) keeping ``fields``.
    :mod:`opsuite_common.protodecode` and the protobuf runtime are imported here, by the
    operators that watch in protobuf only: both cost start-up time and memory."""
    from opsuite_common.protodecode import WatchDecoder  # here: see above

    return WatchDecoder(MESSAGES[plural], fields)


def core_plural(url: str) -> str | None:
    """The plural of a core (``/api/v1``) collection URL, else None."""
    segments = urlsplit(url).path.strip("/").split("/")
    if segments[:2] != ["api", "v1"] or len(segments) not in (3, 5):
        return None
    if len(segments) == 5 and segments[2] != "namespaces":
        return None
    return segments[-1]
