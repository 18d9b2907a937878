"""Executing a SecretSync's plan: Secrets' paths, its own status path, and a refused write
reported without the API server's answer (which may echo the value)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from configmapsync_operator.actions import execute
from configmapsync_operator.copies import slim
from configmapsync_operator.kinds import SECRETS
from configmapsync_operator.reconcile import plan
from opsuite_common.kube import ApiException
from opsuite_common.store import JSON, Store
from opsuite_testkit.configmapsync import NAME, make_world, secret

VALUE = base64.b64encode(b"pl4nted-s3cret").decode()


class EchoingKube:
    """Answers writes with their body, but refuses a create in namespace ``a`` with a body
    that echoes the object, as an admission webhook may."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if (method, path) == ("POST", "/api/v1/namespaces/a/secrets"):
            echo = json.dumps({"message": f"denied: {json.dumps(body)}"})
            future.set_exception(ApiException(422, "Unprocessable Entity", echo))
        elif isinstance(body, dict):
            meta = {**(body.get("metadata") or {}), "resourceVersion": "999", "uid": "new"}
            future.set_result({**body, "metadata": meta})
        else:
            future.set_result({})
        return future

    def create(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body=body)

    def patch(self, path: str, patch: Any, *, patch_type: str = "merge") -> Any:
        return self.request("PATCH", path, body=patch)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, body=kwargs)


async def test_a_refused_secret_write_is_reported_without_the_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b", kind=SECRETS)
    world.add(secret("src", type_="kubernetes.io/tls", data={"tls.key": VALUE}, allowed="*"))
    cache = Store("secrets", {"name": lambda r: [r["metadata"]["name"]]}, transform=slim)
    actions = plan(
        world.sync,
        world.configmaps[world.source_key],
        list(world.namespaces.values()),
        {},
        [],
        datetime.now(UTC),
        kind=SECRETS,
    )
    kube = EchoingKube()
    statuses: list[JSON] = []
    with caplog.at_level(logging.DEBUG):
        done = await execute(
            kube,  # type: ignore[arg-type]
            cache,
            world.sync,
            actions,
            on_status=statuses.append,
            kind=SECRETS,
        )
    assert ("POST", "/api/v1/namespaces/b/secrets") in kube.calls
    assert kube.calls[-1] == (
        "PATCH",
        "/apis/sync.opsuite.dev/v1alpha1/namespaces/src/secretsyncs/sync/status",
    )
    assert done.failed
    (failed,) = statuses[0]["status"]["failedTargets"]
    assert (failed["namespace"], failed["reason"]) == ("a", "WriteFailed")
    assert failed["message"] == "create failed: 422 Unprocessable Entity"
    said = json.dumps(statuses) + caplog.text + json.dumps([i.message for i in done.outcome.issues])  # type: ignore[union-attr]
    assert VALUE not in said
    assert "SecretSync src/sync: wrote 1 copies" in caplog.text
    assert cache.get("b", NAME) is not None  # written through, slim: no value
    assert VALUE not in json.dumps(cache.get("b", NAME))
