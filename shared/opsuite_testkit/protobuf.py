"""Kubernetes protobuf for tests: a JSON object encoded as the API server encodes it, and a
watch event framed as a protobuf watch stream sends it (the inverse of
:mod:`opsuite_common.protodecode`, written from the upstream descriptors, not from it)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from opsuite_common.protodecode import MAGIC, message_class
from opsuite_common.protofields import Fields

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_EMBEDDED = {
    "k8s.io.api.core.v1.EphemeralContainer": "ephemeralContainerCommon",
    "k8s.io.api.core.v1.Volume": "volumeSource",
}


def _fill(msg: Message, value: Mapping[str, Any]) -> None:
    descriptor: Descriptor = msg.DESCRIPTOR
    embedded = _EMBEDDED.get(descriptor.full_name)
    for name, item in value.items():
        if name not in descriptor.fields_by_name and embedded is not None:
            _fill(getattr(msg, embedded), {name: item})
            continue
        field = descriptor.fields_by_name[name]
        target = getattr(msg, name)
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            is_bytes = message.fields_by_name["value"].type == FieldDescriptor.TYPE_BYTES
            for k, v in item.items():
                target[k] = base64.b64decode(v) if is_bytes else v
        elif message is not None and message.full_name in (_META + "Time", _META + "MicroTime"):
            moment = datetime.fromisoformat(item.replace("Z", "+00:00"))
            target.seconds = int(moment.timestamp())
            target.nanos = moment.microsecond * 1000
        elif field.is_repeated and message is not None:
            for one in item:
                _fill(target.add(), one)
        elif field.is_repeated:
            target.extend(item)
        elif message is not None:
            target.SetInParent()
            _fill(target, item)
        elif field.type == FieldDescriptor.TYPE_BYTES:
            setattr(msg, name, base64.b64decode(item))
        else:
            setattr(msg, name, item)


def project(obj: Any, fields: Fields | None) -> Any:
    """A JSON value cut to ``fields`` (None: all of it), a list item by item: what a
    protobuf watch declaring ``fields`` should decode."""
    if fields is None:
        return obj
    if isinstance(obj, list):
        return [project(item, fields) for item in obj]
    return {key: project(obj[key], sub) for key, sub in fields.items() if key in obj}


def encode(full_name: str, obj: Mapping[str, Any]) -> bytes:
    """``obj`` (without apiVersion and kind) as message ``full_name``, wire bytes."""
    msg = message_class(full_name)()
    _fill(msg, obj)
    data: bytes = msg.SerializeToString()
    return data


def watch_frame(event_type: str, obj: Mapping[str, Any], message: str) -> bytes:
    """One frame of a protobuf watch stream (length prefix included): ``obj``, a JSON object
    with apiVersion and kind, encoded as ``message`` and wrapped as the API server does."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return message_frame(event_type, obj["apiVersion"], obj["kind"], encode(message, body))


def message_frame(event_type: str, api_version: str, kind: str, raw: bytes) -> bytes:
    """One frame of a protobuf watch stream (length prefix included) holding ``raw``, the
    wire bytes of a message (one JSON cannot express, say)."""
    unknown = message_class("k8s.io.apimachinery.pkg.runtime.Unknown")()
    unknown.typeMeta.apiVersion = api_version
    unknown.typeMeta.kind = kind
    unknown.raw = raw
    event = message_class(_META + "WatchEvent")()
    event.type = event_type
    event.object.raw = MAGIC + unknown.SerializeToString()
    frame: bytes = event.SerializeToString()
    return len(frame).to_bytes(4, "big") + frame
