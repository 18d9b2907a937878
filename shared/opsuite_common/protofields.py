"""What a protobuf watch declares and how its decoding fails, shared by the watch side
(:mod:`opsuite_common.protowatch`, loaded by every operator) and the decoder
(:mod:`opsuite_common.protodecode`, which loads the protobuf runtime): neither imports the
other for these, and this module imports no protobuf."""

from __future__ import annotations

from collections.abc import Mapping

Fields = Mapping[str, "Fields | None"]
"""Fields to decode, by JSON name: a nested mapping for a message (each item of a list of
messages), None for the whole value."""

OBJECT_META: Fields = {
    "name": None,
    "namespace": None,
    "uid": None,
    "resourceVersion": None,
    "generation": None,
    "creationTimestamp": None,
    "deletionTimestamp": None,
    "labels": None,
    "annotations": None,
    "ownerReferences": None,
}
"""The metadata every decoded object keeps (kopf resumes a watch from resourceVersion)."""


class ProtobufError(ValueError):
    """A frame or object that could not be decoded: not what a protobuf watch sends, or
    holding a value the decoder cannot convert (every failure of the decoder is one)."""


def with_metadata(fields: Fields) -> Fields:
    """``fields`` with :data:`OBJECT_META` added to its ``metadata``."""
    meta = fields.get("metadata") or {}
    return {**fields, "metadata": {**OBJECT_META, **meta}}
