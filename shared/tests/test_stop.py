"""How an operator stops: a real process SIGTERMed, against a local server that speaks enough of
the API server's protocol for the manager, kopf's discovery and watch, and leader election; and
the pods' grace period, which must outlast the longest stop."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kopf
import pytest
from aiohttp import web

from opsuite_common.kopfwatch.settings import configure_kopf
from opsuite_common.leader_election import LeaderElectionConfig
from opsuite_common.lease_api import KubernetesLeaseApi
from opsuite_common.manager import RECONCILE_GRACE
from opsuite_common.options import parse_options
from opsuite_testkit.local_server import address, serve

ROOT = Path(__file__).resolve().parents[2]

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
PODS = "/api/v1/namespaces/ns/pods"
CONFIGMAPS = "/api/v1/namespaces/ns/configmaps"

OPERATOR = """
import sys
from opsuite_common.manager import run_operator
from opsuite_common.store import object_key

def setup(manager):
    async def reconcile(key):
        for name in ("first", "second"):
            body = {"metadata": {"namespace": "ns", "name": name}}
            await manager.kube.request("POST", "/api/v1/namespaces/ns/configmaps", body=body)

    pods = manager.add_controller("pods", reconcile)
    manager.watch("", "v1", "pods", on_event=lambda _type, obj, _old: pods.enqueue(object_key(obj)))

run_operator("test-operator", "A test operator.", setup, sys.argv[1:])
"""
"""Reconciles each pod with two writes, one after the other."""


@dataclass
class ApiServer:
    """One pod; a Lease; ConfigMap creates, the first answered after ``write_delay`` s; a
    release of the Lease (holderIdentity cleared) answered after ``release_delay`` s."""

    write_delay: float
    release_delay: float
    lease: dict[str, Any] | None = None
    version: int = 1
    events: list[str] = field(default_factory=list)
    """The writes other than the Lease's renewals, as the server received them: "create <name>",
    "release"."""
    first_write: asyncio.Event = field(default_factory=asyncio.Event)
    lease_watched: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api", self._json({"kind": "APIVersions", "versions": ["v1"]}))
        app.router.add_get("/apis", self._json({"kind": "APIGroupList", "groups": []}))
        app.router.add_get("/api/v1", self._json(self._core_resources()))
        app.router.add_get(PODS, self._pods)
        app.router.add_post(CONFIGMAPS, self._create)
        app.router.add_get(f"{LEASES}/op", self._get_lease)
        app.router.add_get(LEASES, self._watch_leases)
        app.router.add_post(LEASES, self._create_lease)
        app.router.add_put(f"{LEASES}/op", self._replace_lease)
        return app

    @staticmethod
    def _json(body: dict[str, Any]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def answer(_request: web.Request) -> web.Response:
            return web.json_response(body)

        return answer

    @staticmethod
    def _core_resources() -> dict[str, Any]:
        def resource(name: str, kind: str, namespaced: bool) -> dict[str, Any]:
            return {
                "name": name,
                "singularName": kind.lower(),
                "kind": kind,
                "namespaced": namespaced,
                "verbs": ["get", "list", "watch"],
            }

        return {
            "kind": "APIResourceList",
            "groupVersion": "v1",
            "resources": [
                resource("pods", "Pod", True),
                resource("namespaces", "Namespace", False),
            ],
        }

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        """A streaming list of the one pod, then a watch that stays quiet."""
        meta = {"namespace": "ns", "name": "p", "resourceVersion": "5"}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta}
        if request.query.get("watch") != "true":
            listed = {"resourceVersion": "5"}
            return web.json_response({"kind": "PodList", "metadata": listed, "items": [pod]})
        end = {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}}
        events = [
            {"type": "ADDED", "object": pod},
            {"type": "BOOKMARK", "object": {"metadata": end}},
        ]
        response = web.StreamResponse()
        await response.prepare(request)
        for event in events if request.query.get("sendInitialEvents") == "true" else []:
            await response.write(json.dumps(event).encode() + b"\n")
        await self.closing.wait()
        return response

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = body["metadata"]["name"]
        self.events.append(f"create {name}")
        if name == "first":
            self.first_write.set()
            await asyncio.sleep(self.write_delay)
        return web.json_response(body, status=201)

    async def _get_lease(self, _request: web.Request) -> web.Response:
        if self.lease is None:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        return web.json_response(self.lease)

    async def _watch_leases(self, request: web.Request) -> web.StreamResponse:
        """A watch of the Lease that stays quiet."""
        self.lease_watched.set()
        response = web.StreamResponse()
        await response.prepare(request)
        await self.closing.wait()
        return response

    async def _create_lease(self, request: web.Request) -> web.Response:
        return web.json_response(self.store(await request.json()), status=201)

    async def _replace_lease(self, request: web.Request) -> web.Response:
        lease = self.store(await request.json())
        if not lease["spec"]["holderIdentity"]:
            self.events.append("release")
            await asyncio.sleep(self.release_delay)
        return web.json_response(lease)

    def store(self, lease: dict[str, Any]) -> dict[str, Any]:
        """Keep ``lease`` as the next version."""
        self.version += 1
        lease["metadata"]["resourceVersion"] = str(self.version)
        self.lease = lease
        return lease


@pytest.fixture
async def api_server() -> AsyncIterator[tuple[str, ApiServer]]:
    server = ApiServer(write_delay=2.0, release_delay=4.0)
    runner = await serve(server.app(), shutdown_timeout=0.1)
    try:
        yield f"http://{address(runner)}", server
    finally:
        server.closing.set()
        await runner.cleanup()


@contextlib.asynccontextmanager
async def operator(host: str, tmp_path: Path) -> AsyncIterator[Callable[[], Awaitable[int]]]:
    """The test operator running against ``host`` as pod "operator-0", with leader election;
    yields ``terminate``, which sends SIGTERM and returns the exit code (within 15 s). Its log
    is printed at the end (pytest shows it for a failed test)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": host}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPSUITE_")}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    env |= {"KUBECONFIG": str(kubeconfig), "POD_NAME": "operator-0"}
    flags = ["--leader-elect", "--leader-election-namespace=ns", "--leader-election-id=op"]
    flags += ["--namespace=ns", "--metrics-bind-address=0", "--health-probe-bind-address=0"]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OPERATOR, *flags, "--log-format=text",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    output = asyncio.create_task(process.stdout.read())

    async def terminate() -> int:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(15):
            return await process.wait()

    try:
        yield terminate
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        print((await output).decode(errors="replace"))


async def test_sigterm_finishes_the_reconcile_in_hand_releases_the_lease_and_exits_0(
    api_server: tuple[str, ApiServer], tmp_path: Path
) -> None:
    """SIGTERM while a reconcile waits on a slow write (2 s), the Lease's release answered
    after 4 s: the reconcile ends (its second write arrives), then the Lease is released, and
    the process exits 0. kopf's ultimate exiting timer (5 s from its own SIGTERM handler) used
    to SIGKILL it first (-9)."""
    host, server = api_server
    async with operator(host, tmp_path) as terminate:
        async with asyncio.timeout(15):
            await server.first_write.wait()
        assert await terminate() == 0
    assert server.events == ["create first", "create second", "release"]
    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""


async def test_sigterm_stops_a_standby_at_once(
    api_server: tuple[str, ApiServer], tmp_path: Path
) -> None:
    """A standby waiting for a Lease held by another exits 0 at once on SIGTERM, writing
    nothing."""
    host, server = api_server
    held = {"holderIdentity": "other", "leaseDurationSeconds": 15, "leaseTransitions": 0}
    server.store({"metadata": {"name": "op", "namespace": "ns"}, "spec": held})
    async with operator(host, tmp_path) as terminate:
        async with asyncio.timeout(15):
            await server.lease_watched.wait()
        began = asyncio.get_running_loop().time()
        assert await terminate() == 0
        assert asyncio.get_running_loop().time() - began < 3
    assert server.events == []
    assert server.lease is not None
    assert server.lease["spec"] == held


def test_the_pods_grace_period_covers_the_whole_stop() -> None:
    """Wherever the operators are deployed (the charts' default, the OLM bundles), the kubelet
    waits longer than the worst of a leader's stop: the reconciles' grace, kopf's (its queueing exit
    timeout, then 5 s for the tasks started after it), the drain of the writes (up to the renew
    deadline) and the release (one Lease request)."""
    settings = kopf.OperatorSettings()
    configure_kopf(settings, parse_options("op", "", [], environ={}))
    lease_request = inspect.signature(KubernetesLeaseApi).parameters["request_timeout"].default
    renew_deadline = LeaderElectionConfig("op", "ns").renew_deadline
    stop = RECONCILE_GRACE + settings.queueing.exit_timeout + 5 + renew_deadline + lease_request
    deployed = [
        *ROOT.glob("charts/*/values.yaml"),
        *ROOT.glob("bundle/*/manifests/*.clusterserviceversion.yaml"),
    ]
    periods = {
        path.relative_to(ROOT).as_posix(): int(period)
        for path in deployed
        for period in re.findall(r"terminationGracePeriodSeconds: (\d+)", path.read_text())
    }
    assert len(periods) == 6
    assert all(period > stop for period in periods.values()), (stop, periods)
