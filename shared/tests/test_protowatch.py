"""Pod watches in protobuf: decoding against objects encoded from JSON with the upstream
descriptors (opsuite_testkit.protobuf), and the watch stream against a local HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf
import orjson
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from kopf._cogs.clients import api, errors, watching
from kopf._cogs.structs import credentials, references

from opsuite_common import kopfwatch, protowatch
from opsuite_common.kopfwatch.settings import configure_kopf
from opsuite_common.options import parse_options
from opsuite_common.protodecode import WatchDecoder, message_class
from opsuite_common.protofields import Fields, ProtobufError, with_metadata
from opsuite_common.protowatch import core_plural
from opsuite_testkit.local_server import Hooks, kopf_unpatched, serve_for_kopf
from opsuite_testkit.protobuf import message_frame, project, watch_frame
from poddebugger_operator import actions as debugger
from podset_operator import pod_state as podset

POD = "k8s.io.api.core.v1.Pod"
BOOKMARK_META = {"resourceVersion": "100", "annotations": {"k8s.io/initial-events-end": "true"}}
STATUS = "k8s.io.apimachinery.pkg.apis.meta.v1.Status"
WANTED = {"podset": podset.WATCHED_FIELDS, "poddebugger": debugger.WATCHED_FIELDS}
SLIM = {"podset": podset.slim_pod, "poddebugger": debugger.slim_pod}


def _decode(obj: Mapping[str, Any], fields: Fields, event: str = "ADDED") -> dict[str, Any]:
    return WatchDecoder(POD, fields).decode(watch_frame(event, obj, POD)[4:])


# --------------------------------------------------------------- pods as the API gives them

_text = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8)
_name = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
_time = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
_count = st.integers(0, 2**31 - 1)


def _optional(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts holding any subset of ``fields``."""
    return st.fixed_dictionaries({}, optional=fields)


_owner = st.fixed_dictionaries(
    {"apiVersion": _text, "kind": _text, "name": _name, "uid": _text},
    optional={"controller": st.booleans(), "blockOwnerDeletion": st.booleans()},
)
_metadata = st.fixed_dictionaries(
    {"name": _name, "namespace": _name, "uid": _text, "resourceVersion": _name},
    optional={
        "generation": st.integers(1, 2**40),
        "creationTimestamp": _time,
        "deletionTimestamp": _time,
        "labels": st.dictionaries(_text, st.text(max_size=4), min_size=1, max_size=3),
        "annotations": st.dictionaries(_text, st.text(max_size=4), min_size=1, max_size=3),
        "ownerReferences": st.lists(_owner, min_size=1, max_size=2),
        "finalizers": st.lists(_text, min_size=1, max_size=2),
    },
)
_container = st.fixed_dictionaries(
    {"name": _name, "image": _text},
    optional={"restartPolicy": st.sampled_from(["Always"]), "command": st.lists(_text)},
)
_state = st.one_of(
    st.fixed_dictionaries({"waiting": _optional(reason=_text, message=_text)}),
    st.fixed_dictionaries({"running": _optional(startedAt=_time)}),
    st.fixed_dictionaries(
        {
            "terminated": st.fixed_dictionaries(
                {"exitCode": st.integers(-(2**31), 2**31 - 1)},
                optional={"reason": _text, "message": _text, "finishedAt": _time},
            )
        }
    ),
)
_container_status = st.fixed_dictionaries(
    {"name": _name, "ready": st.booleans(), "restartCount": _count, "image": _text},
    optional={"state": _state, "imageID": _text},
)
_pods = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod"), "metadata": _metadata},
    optional={
        "spec": _optional(
            nodeName=_name,
            containers=st.lists(_container, min_size=1, max_size=2),
            initContainers=st.lists(_container, min_size=1, max_size=2),
            ephemeralContainers=st.lists(
                st.fixed_dictionaries(
                    {"name": _name, "image": _text}, optional={"targetContainerName": _name}
                ),
                min_size=1,
                max_size=2,
            ),
        ),
        "status": _optional(
            phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
            conditions=st.lists(
                st.fixed_dictionaries(
                    {"type": _text, "status": st.sampled_from(["True", "False", "Unknown"])},
                    optional={"lastTransitionTime": _time, "reason": _text},
                ),
                min_size=1,
                max_size=4,
            ),
            containerStatuses=st.lists(_container_status, min_size=1, max_size=2),
            initContainerStatuses=st.lists(_container_status, min_size=1, max_size=2),
            ephemeralContainerStatuses=st.lists(_container_status, min_size=1, max_size=2),
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(pod=_pods, operator=st.sampled_from(sorted(WANTED)))
def test_a_decoded_pod_is_its_json_cut_to_the_fields(pod: dict[str, Any], operator: str) -> None:
    """Decoded from protobuf, a pod is its JSON form cut to the watch's fields (and the
    common metadata), key for key and value for value; the operator's cache record is the
    one it makes of the whole JSON pod."""
    fields = WANTED[operator]
    decoded = _decode(pod, fields)
    assert decoded["type"] == "ADDED"
    expected = project(pod, {**with_metadata(fields), "apiVersion": None, "kind": None})
    for section in ("spec", "status"):  # a view's message is present, if empty
        if section in expected or section in decoded["object"]:
            expected.setdefault(section, {})
    assert decoded["object"] == expected
    assert SLIM[operator](decoded["object"]) == SLIM[operator](pod)


def test_the_view_skips_what_the_watch_does_not_read() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "managedFields": [{"manager": "kubelet"}]},
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n1"},
    }
    decoded = _decode(pod, podset.WATCHED_FIELDS)["object"]
    assert decoded["spec"] == {"nodeName": "n1"}
    assert "managedFields" not in decoded["metadata"]


def test_go_defaults_read_as_json_omits_them() -> None:
    """Go's protobuf encoder writes empty strings and the zero time of non-pointer fields;
    JSON drops the strings (omitempty) and writes the time as null: both are absent."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "generateName": ""}}
    frame = watch_frame("MODIFIED", pod, POD)
    decoded = WatchDecoder(POD, {}).decode(frame[4:])["object"]
    assert decoded["metadata"] == {"name": "p"}
    zero = {**pod, "metadata": {"name": "p", "creationTimestamp": "1970-01-01T00:00:00Z"}}
    assert _decode(zero, {})["object"]["metadata"] == {"name": "p"}


def test_a_bookmark_keeps_its_resource_version_and_annotation() -> None:
    bookmark = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "resourceVersion": "104",
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
    }
    event = _decode(bookmark, podset.WATCHED_FIELDS, "BOOKMARK")
    assert event["type"] == "BOOKMARK"
    assert event["object"]["metadata"] == bookmark["metadata"]


def test_an_error_event_carries_the_status_whole() -> None:
    """kopf restarts a watch on an ERROR event whose Status has code 410."""
    status = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": "too old resource version: 1 (5)",
        "reason": "Expired",
        "code": 410,
        "metadata": {},
    }
    frame = watch_frame("ERROR", status, STATUS)
    event = WatchDecoder(POD, podset.WATCHED_FIELDS).decode(frame[4:])
    assert event == {"type": "ERROR", "object": status}


def test_a_field_the_message_lacks_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="PodStatus has no field 'phaze'"):
        WatchDecoder(POD, {"status": {"phaze": None}})


def test_an_undecodable_frame_raises_a_protobuf_error() -> None:
    decoder = WatchDecoder(POD, {})
    with pytest.raises(ProtobufError, match="undecodable"):
        decoder.decode(b"\x12\x09\x0a")  # cut short
    with pytest.raises(ProtobufError, match="prefix"):
        decoder.decode(b"\x0a\x05ADDED\x12\x03\x0a\x01x")


def _invalid_utf8(frame: bytes) -> bytes:
    """``frame`` with every "AtA" made Latin-1 "été": invalid UTF-8, of the same length."""
    return frame.replace(b"AtA", b"\xe9t\xe9")


def test_invalid_utf8_is_text_with_replacement_characters() -> None:
    """A proto2 string is not checked for UTF-8 on the wire (a pods/status write in protobuf
    stores any bytes): upb gave an invalid one as bytes (a status message then read
    "b'\\xe9t\\xe9 KO'"). Each is text, invalid bytes replaced by U+FFFD, as in the JSON
    the API server encodes of it. upb fails on a map key that is not UTF-8 (the API server
    validates label and annotation keys): a ProtobufError, and the stream goes on in JSON."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"a": "AtA KO"}},
        "spec": {"containers": [{"name": "c", "command": ["AtA KO"]}]},
        "status": {"phase": "AtA KO"},
    }
    fields: Fields = {"spec": {"containers": {"command": None}}, "status": {"phase": None}}
    decoder = WatchDecoder(POD, fields)
    decoded = decoder.decode(_invalid_utf8(watch_frame("ADDED", pod, POD))[4:])["object"]
    text = "\ufffdt\ufffd KO"
    assert decoded["metadata"]["annotations"] == {"a": text}
    assert decoded["spec"] == {"containers": [{"command": [text]}]}
    assert decoded["status"] == {"phase": text}
    labelled = {**pod, "metadata": {"name": "p", "labels": {"AtA": "x"}}}
    with pytest.raises(ProtobufError, match="undecodable"):
        decoder.decode(_invalid_utf8(watch_frame("ADDED", labelled, POD))[4:])


def _pod_created_at(seconds: int) -> bytes:
    """A frame of a pod whose creationTimestamp is ``seconds`` (metav1.Time holds any int64;
    JSON cannot say a year past 9999 to the test kit's encoder)."""
    pod = message_class(POD)()
    pod.metadata.name = "late"
    pod.metadata.namespace = "ns"
    pod.metadata.resourceVersion = "101"
    pod.metadata.creationTimestamp.seconds = seconds
    return message_frame("MODIFIED", "v1", "Pod", pod.SerializeToString())


def test_a_time_out_of_range_is_a_protobuf_error() -> None:
    """Past what the C library's gmtime takes (year 2**31), converting a metav1.Time raised
    OSError, which no caller expected: it ended the pod watch for good. Every failure to
    decode is a ProtobufError."""
    decoder = WatchDecoder(POD, {})
    meta = decoder.decode(_pod_created_at(253402300800)[4:])["object"]["metadata"]
    assert meta["creationTimestamp"] == "10000-01-01T00:00:00Z"  # as Go formats it
    with pytest.raises(ProtobufError, match="undecodable"):
        decoder.decode(_pod_created_at(10**17)[4:])


@pytest.mark.parametrize(
    ("url", "plural"),
    [
        ("https://h/api/v1/namespaces/ns/pods?watch=true", "pods"),
        ("https://h/api/v1/pods?watch=true", "pods"),
        ("https://h/api/v1/namespaces?watch=true", "namespaces"),
        ("https://h/api/v1/namespaces/ns", None),
        ("https://h/api/v1/nodes/n1/proxy", None),
        ("https://h/apis/apps/v1/namespaces/ns/deployments", None),
    ],
)
def test_core_plural(url: str, plural: str | None) -> None:
    assert core_plural(url) == plural


# --------------------------------------------------------------- the stream

PATH = "/api/v1/namespaces/ns/pods"


def _pod(name: str, rv: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "resourceVersion": rv}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": "Running"}}


PODS = references.Resource(group="", version="v1", plural="pods", namespaced=True)


async def _serve(
    pods: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> tuple[web.AppRunner, credentials.Vault]:
    """Serve ``pods`` at the pods of "ns", kopf's credentials pointed at it."""
    app = web.Application()
    app.router.add_get(PATH, pods)
    return await serve_for_kopf(app)


@pytest.fixture
def watching_in_protobuf(monkeypatch: pytest.MonkeyPatch) -> None:
    """opsuite's patches of kopf, pods watched in protobuf (their phase); kopf restored after."""
    kopf_unpatched(monkeypatch)
    decoder = WatchDecoder(POD, {"status": {"phase": None}})
    kopfwatch.install(Hooks(decoders=lambda url: decoder if core_plural(url) == "pods" else None))


@pytest.fixture
async def served(watching_in_protobuf: None) -> AsyncIterator[Any]:
    """``run(body, content_type, split)``: the events opsuite's ``api.stream`` yields for a
    watch of pods in "ns" answered with ``body`` (sent in pieces of ``split`` bytes), and the
    Accept header it sent."""
    runners: list[web.AppRunner] = []

    async def run(
        body: bytes, content_type: str, split: int, status: int = 200
    ) -> tuple[list[Any], str]:
        accepted: list[str] = []

        async def pods(request: web.Request) -> web.StreamResponse:
            accepted.append(request.headers.get("Accept", ""))
            response = web.StreamResponse(status=status, headers={"Content-Type": content_type})
            await response.prepare(request)
            for start in range(0, len(body), split):
                await response.write(body[start : start + split])
                await asyncio.sleep(0)
            return response

        runner, vault = await _serve(pods)
        runners.append(runner)
        url = PODS.get_url(namespace=references.NamespaceName("ns"), params={"watch": "true"})
        try:
            async with asyncio.timeout(10):
                settings = kopf.OperatorSettings()
                settings.networking.error_backoffs = [0.01]  # kopf retries a 403 once, soon
                stream = api.stream(url, settings=settings, logger=logging.getLogger(__name__))
                return [event async for event in stream], accepted[0]
        finally:
            await vault.close()

    yield run
    for runner in runners:
        await runner.cleanup()


@pytest.mark.parametrize("split", [1, 7, 1 << 16])
async def test_a_protobuf_stream_yields_each_frame_as_a_json_event(served: Any, split: int) -> None:
    """Frames split across reads anywhere (inside the length prefix too), several in one."""
    pods = [_pod("a", "5"), _pod("b", "6"), _pod("c", "7")]
    body = b"".join(watch_frame("ADDED", p, POD) for p in pods)
    events, accept = await served(body, protowatch.WATCH_CONTENT_TYPE, split)
    assert accept == "application/vnd.kubernetes.protobuf, application/json"  # as client-go
    assert [e["object"] for e in events] == pods
    assert [e["type"] for e in events] == ["ADDED"] * 3


async def test_a_stream_cut_inside_a_frame_is_an_error(served: Any) -> None:
    """kopf retries a watch whose response broke off (a payload error)."""
    body = watch_frame("ADDED", _pod("a", "5"), POD)
    with pytest.raises(aiohttp.ClientPayloadError, match="cut in a frame"):
        await served(body + body[:9], protowatch.WATCH_CONTENT_TYPE, 4)


async def test_an_undecodable_frame_ends_the_stream_as_a_cut_does(served: Any) -> None:
    """kopf reconnects, in JSON (a streaming list not yet over is listed again, in pages)."""
    frame = watch_frame("ADDED", _pod("a", "5"), POD)
    broken = (len(frame) - 4).to_bytes(4, "big") + b"\x12" + frame[5:]
    with pytest.raises(aiohttp.ClientPayloadError, match=r"undecodable|prefix"):
        await served(frame + broken, protowatch.WATCH_CONTENT_TYPE, 1 << 16)


async def test_an_error_answered_in_protobuf_raises_what_json_would(served: Any) -> None:
    """A watch that asked for protobuf gets its errors in protobuf too (a Status): kopf reads
    error bodies as text, and failed on it (UnicodeDecodeError, the watcher gone, the process
    killed instead of stepping down: e2e/test_leader_election.py). It now raises the error
    kopf raises for the JSON Status: 403 here, which kopf retries and then gives up on."""
    status = {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": 'pods is forbidden: User "a" cannot watch resource "pods"',
        "reason": "Forbidden",
        "code": 403,
    }
    unknown = watch_frame("ERROR", status, STATUS)  # its object: MAGIC + the Status
    body = WatchDecoder(POD, {})._event.FromString(unknown[4:]).object.raw
    with pytest.raises(errors.APIForbiddenError) as raised:
        await served(body, protowatch.CONTENT_TYPE, 1 << 16, status=403)
    assert raised.value.status == 403
    assert raised.value.message == status["message"]


async def test_a_frame_that_fails_to_decode_turns_its_stream_to_json(
    watching_in_protobuf: None,
) -> None:
    """A pod whose protobuf the decoder fails on (a time out of range) ends the stream, and
    the watch goes on in JSON from the last resourceVersion: it had killed the pod watch,
    on every restart, until that pod changed. Invalid UTF-8 before it is text."""
    protobuf: list[bytes] = [
        watch_frame("ADDED", _pod("a", "5"), POD),
        _invalid_utf8(watch_frame("ADDED", {**_pod("b", "6"), "status": {"phase": "AtA"}}, POD)),
        watch_frame("BOOKMARK", {**_pod("", "100"), "metadata": BOOKMARK_META}, POD),
        _pod_created_at(10**17),
    ]
    late = _pod("late", "101")  # the JSON the API server then sends (its time left out)
    requests: list[tuple[str, dict[str, str]]] = []
    closing = asyncio.Event()

    async def pods(request: web.Request) -> web.StreamResponse:
        accept = request.headers.get("Accept", "")
        requests.append((accept, dict(request.query)))
        wanted = (
            "application/vnd.kubernetes.protobuf;stream=watch"
            if "protobuf" in accept
            else "application/json"
        )
        response = web.StreamResponse(headers={"Content-Type": wanted})
        await response.prepare(request)
        if "protobuf" in accept:
            await response.write(b"".join(protobuf))
        else:
            await response.write(orjson.dumps({"type": "MODIFIED", "object": late}) + b"\n")
        await closing.wait()
        return response

    runner, vault = await _serve(pods)
    settings = kopf.OperatorSettings()
    configure_kopf(settings, parse_options("op", "", [], environ={}))
    stream: Any = watching.infinite_watch(
        settings=settings, resource=PODS, namespace=references.NamespaceName("ns")
    )
    seen: list[Any] = []
    try:
        async with contextlib.aclosing(stream), asyncio.timeout(10):
            async for item in stream:
                seen.append(item)
                if isinstance(item, dict) and item["type"] == "MODIFIED":
                    break
    finally:
        closing.set()
        await vault.close()
        await runner.cleanup()
    names = [i["object"]["metadata"].get("name") if isinstance(i, dict) else i for i in seen]
    assert names == ["a", "b", watching.Bookmark.LISTED, None, "late"]
    assert seen[1]["object"]["status"] == {"phase": "\ufffdt\ufffd"}
    assert seen[-1]["object"] == late
    (first, _), (second, query) = requests
    assert "protobuf" in first
    assert "protobuf" not in second
    assert query["resourceVersion"] == "100"


async def test_an_api_server_answering_json_is_read_as_json(served: Any) -> None:
    """The Accept header is a preference: a JSON answer is read as JSON lines."""
    body = b"".join(orjson.dumps({"type": "ADDED", "object": _pod(n, "5")}) + b"\n" for n in "ab")
    events, _ = await served(body, "application/json", 5)
    assert [e["object"]["metadata"]["name"] for e in events] == ["a", "b"]


@pytest.mark.parametrize(
    ("operator", "loads"),
    [("configmapsync", False), ("podset", True), ("poddebugger", True)],
)
def test_only_the_operators_watching_pods_load_the_protobuf_runtime(
    operator: str, loads: bool, tmp_path: Any
) -> None:
    """ConfigMapSync watches no pods: the protobuf runtime would cost it some 40 ms and 6 MiB
    at every start for nothing."""
    script = (
        "import sys, pytest\n"
        "from opsuite_testkit import offline_manager\n"
        f"from {operator}_operator.handlers import setup\n"
        f"manager = offline_manager('op', ('a',), __import__('pathlib').Path({str(tmp_path)!r}),"
        " pytest.MonkeyPatch())\n"
        "setup(manager)\n"
        "print('google.protobuf' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == str(loads)
