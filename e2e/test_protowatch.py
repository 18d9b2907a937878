"""Pod watches in protobuf against the real API server: what the operators decode from its
protobuf stream is what they read from its JSON stream of the same pods."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes import client

from e2e.cluster import wait_until
from opsuite_common.protodecode import WatchDecoder
from opsuite_common.protofields import with_metadata
from opsuite_common.protowatch import MESSAGES, WATCH_CONTENT_TYPE
from opsuite_testkit.protobuf import project
from poddebugger_operator import actions as debugger
from podset_operator import pod_state as podset

WANTED = {"podset": podset.WATCHED_FIELDS, "poddebugger": debugger.WATCHED_FIELDS}
SLIM = {"podset": podset.slim_pod, "poddebugger": debugger.slim_pod}


def _watch(api: client.ApiClient, namespace: str, accept: str) -> bytes:
    """The body of a streaming list of the namespace's pods, which the API server ends after
    two seconds."""
    query = {
        "watch": "true",
        "sendInitialEvents": "true",
        "allowWatchBookmarks": "true",
        "resourceVersionMatch": "NotOlderThan",
        "timeoutSeconds": "2",
    }
    serialized = api.param_serialize(
        "GET",
        f"/api/v1/namespaces/{namespace}/pods",
        query_params=list(query.items()),
        header_params={"Accept": accept},
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*serialized, _request_timeout=30)
    assert response.status == 200
    assert response.getheader("Content-Type").startswith(accept.split(";")[0])
    return bytes(response.read())


def _frames(body: bytes) -> list[bytes]:
    frames, start = [], 0
    while start < len(body):
        stop = start + 4 + int.from_bytes(body[start : start + 4], "big")
        frames.append(body[start + 4 : stop])
        start = stop
    assert start == len(body)
    return frames


def test_pods_decoded_from_protobuf_read_as_their_json(
    api: client.ApiClient, namespace: str
) -> None:
    """Pods with labels, annotations, an owner, a sidecar and an ephemeral container, as the
    scheduler and the node have filled their status in."""
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "owner"}, "data": {}}
    )
    for index in range(3):
        pod = {
            "metadata": {
                "name": f"p{index}",
                "labels": {"app": "protowatch", "index": str(index)},
                "annotations": {"controller.kubernetes.io/pod-deletion-cost": str(index)},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner.metadata.uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "initContainers": [{"name": "side", "image": "nginx", "restartPolicy": "Always"}],
                "containers": [{"name": "main", "image": "nginx"}],
            },
        }
        core.create_namespaced_pod(namespace, pod)
    for index in range(3):
        wait_until(
            lambda i=index: core.read_namespaced_pod(f"p{i}", namespace).status.phase,
            lambda phase: phase == "Running",
            timeout=60,
            what=f"pod p{index} Running",
        )
    core.patch_namespaced_pod_ephemeralcontainers(
        "p0",
        namespace,
        {"spec": {"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}},
    )
    pods, frames = _same_versions(api, namespace)
    assert sorted(pods) == ["p0", "p1", "p2"]
    assert pods["p0"]["spec"]["ephemeralContainers"]
    for operator, fields in WANTED.items():
        decoder = WatchDecoder(MESSAGES["pods"], fields)
        events = [decoder.decode(frame) for frame in frames]
        assert [e["type"] for e in events] == ["ADDED"] * 3 + ["BOOKMARK"]
        bookmark = events[-1]["object"]["metadata"]
        assert bookmark["annotations"] == {"k8s.io/initial-events-end": "true"}
        for event in events[:-1]:
            decoded = event["object"]
            pod = pods[decoded["metadata"]["name"]]
            assert SLIM[operator](decoded) == SLIM[operator](pod), operator
            wanted = {**with_metadata(fields), "apiVersion": None, "kind": None}
            assert decoded == project(pod, wanted), operator


def _initial(events: list[Any], kind: Any) -> list[Any]:
    """The initial events: up to the bookmark that ends them."""
    end = next(i for i, e in enumerate(events) if kind(e) == "BOOKMARK")
    return events[: end + 1]


def _same_versions(api: client.ApiClient, namespace: str) -> tuple[dict[str, Any], list[bytes]]:
    """The pods by name from a JSON streaming list and the frames of a protobuf one that saw
    the same versions (the node may still be updating a status between the two)."""
    decoder = WatchDecoder(MESSAGES["pods"], {})
    for _ in range(10):
        body = _watch(api, namespace, "application/json")
        listed = _initial([orjson.loads(line) for line in body.splitlines()], lambda e: e["type"])
        frames = _initial(
            _frames(_watch(api, namespace, WATCH_CONTENT_TYPE)),
            lambda f: decoder.decode(f)["type"],
        )
        pods = {e["object"]["metadata"]["name"]: e["object"] for e in listed[:-1]}
        versions = {
            (o["metadata"]["name"], o["metadata"]["resourceVersion"])
            for o in (decoder.decode(f)["object"] for f in frames[:-1])
        }
        if versions == {(n, p["metadata"]["resourceVersion"]) for n, p in pods.items()}:
            return pods, frames
    raise AssertionError("the pods kept changing between the two listings")
