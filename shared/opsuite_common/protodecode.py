"""The decoding half of :mod:`opsuite_common.protowatch`, which imports it when a watch needs
it (this module imports no other part of the watch): each object parsed into a view of
the declared fields and turned into its JSON dict (the protobuf runtime, upb)."""

from __future__ import annotations

import base64
import itertools
import keyword
import time
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from opsuite_common.kube_protos import FILE_DESCRIPTOR_SET
from opsuite_common.protofields import Fields, ProtobufError, with_metadata
from opsuite_common.store import JSON

MAGIC = b"k8s\x00"
"""Prefix of an encoded object: then a runtime.Unknown with the type and the message."""

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_TIME = _META + "Time"
_MICRO_TIME = _META + "MicroTime"


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(FILE_DESCRIPTOR_SET).file:
        pool.Add(file)
    return pool


@cache
def message_class(full_name: str) -> type[Message]:
    """The generated class of a Kubernetes message, e.g. ``k8s.io.api.core.v1.Pod``."""
    cls: type[Message] = message_factory.GetMessageClass(_pool().FindMessageTypeByName(full_name))
    return cls


_ABSENT = object()
_INLINED = {
    "k8s.io.api.core.v1.EphemeralContainer": "ephemeralContainerCommon",
    "k8s.io.api.core.v1.Volume": "volumeSource",
}
"""Messages embedding another whose fields JSON inlines (Go struct embedding)."""
_SECONDS: dict[int, str] = {}
"""Formatted times by second: the objects of a listing share few of them."""


def _second(seconds: int) -> str:
    if len(_SECONDS) >= 4096:
        _SECONDS.clear()
    text = _SECONDS[seconds] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return text


def _time(msg: Any) -> Any:
    """metav1.Time (unset: the zero time): seconds, in RFC 3339; the zero time is JSON's null
    (absent)."""
    seconds = msg.seconds
    if seconds == 0 and msg.nanos == 0:
        return _ABSENT
    return f"{_SECONDS.get(seconds) or _second(seconds)}Z"


def _micro_time(msg: Any) -> Any:
    """metav1.MicroTime: microseconds, in RFC 3339; the zero time is absent."""
    seconds, nanos = msg.seconds, msg.nanos
    if seconds == 0 and nanos == 0:
        return _ABSENT
    return f"{_SECONDS.get(seconds) or _second(seconds)}.{nanos // 1000:06d}Z"


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _text(value: bytes) -> str:
    """A proto2 string that is not UTF-8, which upb gives as bytes (nothing checks it on the
    wire), as text: what is not UTF-8 replaced by U+FFFD, as Go's JSON encoder does."""
    return value.decode("utf-8", "replace")


def _resolve(
    descriptor: Descriptor, inlined: str | None, fields: Fields | None
) -> tuple[dict[str, Fields | None], dict[str, Fields | None]]:
    """``fields`` of ``descriptor`` (None: all) split into its own fields and those of the
    message its field ``inlined`` embeds (JSON inlines them); a name that is neither raises
    ValueError."""
    holder = descriptor.fields_by_name.get(inlined) if inlined is not None else None
    embedded = holder.message_type if holder is not None else None  # a view may lack it
    if fields is None:
        own = dict.fromkeys(f.name for f in descriptor.fields if f.name != inlined)
        return own, dict.fromkeys(f.name for f in embedded.fields) if embedded else {}
    own, into = {}, {}
    for name, sub in fields.items():
        if name in descriptor.fields_by_name:
            own[name] = sub
        elif embedded is not None and name in embedded.fields_by_name:
            into[name] = sub
        else:
            raise ValueError(f"{descriptor.full_name} has no field {name!r}")
    return own, into


def _scalar(field: FieldDescriptor, value: str) -> str:
    """The expression of ``field``'s scalar ``value`` in JSON (``value``: a variable, for a
    string, read twice): a string as text (:func:`_text` when upb gave bytes; it fails on a
    map key that is not UTF-8 instead), bytes in base64."""
    if field.type == FieldDescriptor.TYPE_STRING:
        return f"{value} if {value}.__class__ is str else _text({value})"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return f"_b64({value})"
    return value


class _Compiler:
    """Writes, for a message type and the fields wanted of it, a Python function turning such
    a message into its JSON dict: one statement per field, no loop over field descriptors
    (faster than interpreting them, which counts for the tens of thousands of objects a
    listing brings)."""

    def __init__(self, origin: Mapping[str, str]) -> None:
        """``origin``: the upstream name of each view message (:class:`_Views`)."""
        self.origin = origin
        self.namespace: dict[str, Any] = {
            "_ABSENT": _ABSENT,
            "_b64": _b64,
            "_text": _text,
            "_time": _time,
            "_micro_time": _micro_time,
        }
        self.source: list[str] = []

    def function(self, descriptor: Descriptor, fields: Fields | None) -> str:
        """The name of the function converting ``descriptor``'s messages (``fields`` of
        them; None: every field); a name that is not a field raises ValueError."""
        inlined = _INLINED.get(self._upstream(descriptor))
        own, into = _resolve(descriptor, inlined, fields)
        body = [
            line
            for n, sub in own.items()
            for line in self._field(descriptor.fields_by_name[n], sub)
        ]
        if into:
            assert inlined is not None
            helper = self.function(descriptor.fields_by_name[inlined].message_type, into)
            body[:0] = [
                f"if m.HasField({inlined!r}):",
                f"    o.update({helper}(getattr(m, {inlined!r})))",
            ]
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = None  # reserve the name before nested functions take theirs
        self.source += [f"def {name}(m):", "    o = {}"]
        self.source += [f"    {line}" for line in body]
        self.source += ["    return o", ""]
        return name

    def _upstream(self, descriptor: Descriptor) -> str:
        return self.origin.get(descriptor.full_name, descriptor.full_name)

    def _field(self, field: FieldDescriptor, sub: Fields | None) -> list[str]:
        name = field.name
        get = f"getattr(m, {name!r})" if keyword.iskeyword(name) else f"m.{name}"
        put = f"o[{name!r}]"
        message = field.message_type
        if message is not None and message.GetOptions().map_entry:
            value = message.fields_by_name["value"]
            if value.message_type is not None:
                raise ValueError(f"map of messages not supported: {field.full_name}")
            x = _scalar(value, "x")
            made = "dict(v.items())" if x == "x" else f"{{k: {x} for k, x in v.items()}}"
            return [f"v = {get}", "if v:", f"    {put} = {made}"]
        upstream = self._upstream(message) if message is not None else None
        if upstream in (_TIME, _MICRO_TIME):
            if field.is_repeated:
                raise ValueError(f"list of timestamps not supported: {field.full_name}")
            convert = "_time" if upstream == _TIME else "_micro_time"
            # An unset time reads as the zero time, which is absent too: no HasField.
            return [f"v = {convert}({get})", "if v is not _ABSENT:", f"    {put} = v"]
        if message is not None:
            helper = self.function(message, sub)
            if field.is_repeated:
                return [f"v = {get}", "if v:", f"    {put} = [{helper}(x) for x in v]"]
            return [f"if m.HasField({name!r}):", f"    {put} = {helper}({get})"]
        if field.is_repeated:
            x = _scalar(field, "x")
            made = "list(v)" if x == "x" else f"[{x} for x in v]"
            return [f"v = {get}", "if v:", f"    {put} = {made}"]
        if field.type == FieldDescriptor.TYPE_STRING:  # "" is omitted, as JSON does
            return [f"v = {get}", "if v:", f"    {put} = {_scalar(field, 'v')}"]
        return [f"if m.HasField({name!r}):", f"    {put} = {_scalar(field, get)}"]

    def compile(self, descriptor: Descriptor, fields: Fields | None) -> Callable[[Any], JSON]:
        """The converter of ``descriptor``'s messages, compiled."""
        name = self.function(descriptor, fields)
        exec("\n".join(self.source), self.namespace)  # source written above
        converter: Callable[[Any], JSON] = self.namespace[name]
        return converter


class _Views:
    """Message types holding only some fields of upstream ones (same numbers and types), in
    a pool of their own: parsing into a view skips what it lacks (kept as unknown bytes)
    instead of building every container, volume and probe of a pod."""

    def __init__(self, package: str) -> None:
        self.file = descriptor_pb2.FileDescriptorProto(
            name=f"{package.replace('.', '/')}.proto", package=package, syntax="proto2"
        )
        self.origin: dict[str, str] = {}

    def message(self, descriptor: Descriptor, fields: Fields | None) -> str:
        """Add the view of ``descriptor`` with ``fields`` (None: all); its full name."""
        upstream = descriptor_pb2.DescriptorProto()
        descriptor.CopyToProto(upstream)
        inlined = _INLINED.get(descriptor.full_name)
        wanted, into = _resolve(descriptor, inlined, fields)
        if into:
            assert inlined is not None
            wanted[inlined] = into
        view = self.file.message_type.add(name=f"M{len(self.file.message_type)}")
        full_name = f"{self.file.package}.{view.name}"
        self.origin[full_name] = descriptor.full_name
        for proto in upstream.field:
            if proto.name not in wanted:
                continue
            copy = view.field.add()
            copy.CopyFrom(proto)
            message = descriptor.fields_by_name[proto.name].message_type
            if message is None:
                continue
            if message.GetOptions().map_entry:
                entry = next(n for n in upstream.nested_type if n.name == message.name)
                view.nested_type.add().CopyFrom(entry)
                copy.type_name = f".{full_name}.{entry.name}"
            else:
                copy.type_name = "." + self.message(message, wanted[proto.name])
        return full_name

    def message_class(self, name: str) -> type[Message]:
        """The class of view ``name``, once every view is added."""
        pool = descriptor_pool.DescriptorPool()
        pool.Add(self.file)
        cls: type[Message] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
        return cls


def _viewer(upstream: str, fields: Fields | None) -> tuple[type[Message], Callable[[Any], JSON]]:
    """The view class of message ``upstream`` with ``fields``, and its converter."""
    views = _Views(f"opsuite.view{next(_VIEW_IDS)}")
    cls = views.message_class(views.message(message_class(upstream).DESCRIPTOR, fields))
    return cls, _Compiler(views.origin).compile(cls.DESCRIPTOR, fields)


_VIEW_IDS = itertools.count()


class WatchDecoder:
    """Decodes the frames of one resource's protobuf watch into JSON watch events
    (``{"type": ..., "object": ...}``), the objects cut to ``fields`` plus
    :data:`~opsuite_common.protofields.OBJECT_META`; an ERROR event's Status is decoded whole."""

    def __init__(self, message: str, fields: Fields) -> None:
        """``message``: the full name of the resource's message (``k8s.io.api.core.v1.Pod``)."""
        self._message, self._convert = _viewer(message, with_metadata(fields))
        self._status, self._convert_status = _viewer(_META + "Status", None)
        self._event = message_class(_META + "WatchEvent")
        self._unknown = message_class("k8s.io.apimachinery.pkg.runtime.Unknown")

    def status(self, body: bytes) -> JSON | None:
        """An error answer's Status as its JSON dict; None when it is not one."""
        try:
            obj = self._object(body)
        except ProtobufError:
            return None
        return obj if obj["kind"] == "Status" else None

    def decode(self, frame: bytes) -> JSON:
        """One frame (without its length prefix) as a JSON watch event."""
        try:
            event = self._event.FromString(frame)
        except DecodeError as exc:
            raise ProtobufError(f"undecodable watch frame: {exc}") from exc
        return {"type": event.type, "object": self._object(event.object.raw)}

    def _object(self, raw: bytes) -> JSON:
        """An encoded object (:data:`MAGIC`, then a runtime.Unknown holding the message) as
        its JSON dict, apiVersion and kind included: a Status whole, else the view's fields."""
        if not raw.startswith(MAGIC):
            raise ProtobufError("watch event object without the protobuf prefix")
        try:
            unknown = self._unknown.FromString(raw[len(MAGIC) :])
            kind = unknown.typeMeta.kind
            if kind == "Status":
                obj = self._convert_status(self._status.FromString(unknown.raw))
            else:
                obj = self._convert(self._message.FromString(unknown.raw))
        except Exception as exc:  # the parser's, or a converter's on a value Python refuses
            raise ProtobufError(f"undecodable watch frame: {exc!r}") from exc
        obj["apiVersion"] = unknown.typeMeta.apiVersion
        obj["kind"] = kind
        return obj
