"""What one scale-curve run creates on the plane, grown from one size to the next and deleted at
the end: kwok nodes for its pods (tainted so that only its pods go there), its namespaces, the
PodSet that podset-operator scales (and a PodDebugger on its pods), ConfigMapSync's syncs and
the copies configmapsync-operator writes. Every name carries the run's random id."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench import configmapsync as cms
from bench import plane
from bench import poddebugger as pdb
from bench.curve_results import CRDS
from bench.implementations import IMPLEMENTATIONS
from bench.objwatch import Tracker, wide_client
from bench.plane import read, request, request_json
from bench.workloads import PODSET, pod_template
from opsuite_common.kube import resource_path

NODE_PODS = 1000
"""Pods per added kwok node (the plane's own take 1,100)."""
NODE_LABEL = "opsuite.dev/bench-curve"
DESTINATIONS = 500


@dataclass(frozen=True)
class RunNames:
    """The names one run gives what it creates: two runs (or one's leftovers) never share a
    namespace or a node."""

    run_id: str

    @classmethod
    def new(cls) -> RunNames:
        return cls(secrets.token_hex(3))

    @property
    def prefix(self) -> str:
        return f"curve-{self.run_id}"

    @property
    def pods_ns(self) -> str:
        return f"{self.prefix}-pods"

    @property
    def source_ns(self) -> str:
        return f"{self.prefix}-src"

    @property
    def destinations(self) -> list[str]:
        """The namespaces every sync copies its source into."""
        return [f"{self.prefix}-d{i:03d}" for i in range(DESTINATIONS)]

    @property
    def dest_label(self) -> str:
        """The label that makes a namespace one of the syncs' destinations."""
        return f"{NODE_LABEL}-{self.run_id}"

    def node(self, index: int) -> str:
        return f"kwok-{self.prefix}-{index:02d}"

    def watched_namespace(self, pair: str) -> str | None:
        """Where ``pair``'s operator watches: cluster-wide (ConfigMapSync), or the pods'
        namespace."""
        return None if pair == "configmapsync" else self.pods_ns


def wait_until(done: Callable[[], bool], what: str, timeout: float, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(interval)


class CurveObjects:
    """A run's objects: made bigger with :meth:`grow_pods` and :meth:`grow_copies`, each change
    to them a new ``tick``, all deleted by :meth:`cleanup`. ``timeout`` bounds every wait."""

    def __init__(
        self,
        api: client.ApiClient,
        names: RunNames,
        timeout: float,
        progress: Callable[[str], None],
    ):
        self.api = api
        self.wide = wide_client()
        self.names = names
        self.timeout = timeout
        self.progress = progress
        self.nodes: list[str] = []
        self.namespaces: list[str] = []
        self.syncs: list[str] = []
        self.sync_uids: list[str] = []
        self.tick = 0

    def next_tick(self) -> str:
        """A new value for every object a burst changes."""
        self.tick += 1
        return str(self.tick)

    def add_nodes(self, count: int) -> None:
        """kwok nodes for the run's pods, tainted so that nothing else lands there."""
        run_id = self.names.run_id
        capacity = {"cpu": "64", "memory": "256Gi", "pods": str(NODE_PODS + 50)}
        for i in range(len(self.nodes), count):
            name = self.names.node(i)
            body = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {plane.FAKE_NODE_ANNOTATION: "fake"},
                    "labels": {
                        "type": "kwok",
                        NODE_LABEL: run_id,
                        "kubernetes.io/hostname": name,
                    },
                },
                "spec": {"taints": [{"key": NODE_LABEL, "value": run_id, "effect": "NoSchedule"}]},
                "status": {"allocatable": capacity, "capacity": capacity},
            }
            request_json(self.api, "POST", resource_path("v1", "nodes"), body=body)
            self.nodes.append(name)
        wait_until(
            lambda: plane._ready_fake_nodes() >= count,
            f"{count} kwok nodes Ready",
            self.timeout,
            2.0,
        )

    def _namespace(self, name: str) -> None:
        self.namespaces.append(name)
        plane.create_namespace(self.api, name, {cms.NAMESPACE_LABEL: self.names.run_id})

    def _podset(self, replicas: int) -> dict[str, Any]:
        run_id = self.names.run_id
        body = PODSET.manifest("curve", replicas)
        spec = body["spec"]["template"]["spec"] = dict(pod_template("curve")["spec"])
        spec["nodeSelector"] = {NODE_LABEL: run_id}
        spec["tolerations"] = [{"key": NODE_LABEL, "operator": "Equal", "value": run_id}]
        return body

    def _podset_ready(self, n: int) -> bool:
        obj = request_json(self.api, "GET", PODSET.path(self.names.pods_ns, "curve"))
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == obj["metadata"].get("generation")
            and status.get("readyReplicas") == n
        )

    def grow_pods(self, n: int) -> None:
        """N Running pods of the PodSet (podset-operator scales it), and the PodDebugger."""
        pods_ns = self.names.pods_ns
        self.add_nodes(-(-n // NODE_PODS))
        if pods_ns not in self.namespaces:
            self._namespace(pods_ns)
            read(request(self.api, "POST", PODSET.path(pods_ns), body=self._podset(n)))
            debugger = pdb._debugger("curve", "x")
            debugger["spec"]["selector"] = {"matchLabels": {"app": "curve"}}
            debugger["spec"]["maxPods"] = 10
            path = resource_path(pdb.GROUP_VERSION, "poddebuggers", pods_ns)
            request_json(self.api, "POST", path, body=debugger)
        else:
            PODSET.scale(self.api, pods_ns, "curve", n)
        impl = IMPLEMENTATIONS["podset"][0]
        process = impl.process(pods_ns, f"{self.names.prefix}-grow").start(self.timeout)
        try:
            began = time.monotonic()
            wait_until(lambda: self._podset_ready(n), f"{n} pods ready", self.timeout, 5.0)
            self.progress(f"{n} pods Running in {time.monotonic() - began:.0f} s")
        finally:
            process.stop()

    def track_copies(self) -> Tracker[str]:
        """A watch of every copy the run's syncs wrote (its data version), started."""
        selector = f"{cms.OWNER_LABEL} in ({','.join(self.sync_uids)})"
        path = resource_path("v1", "configmaps")
        return Tracker(self.api, path, cms._version, selector).start(timeout=120)

    def grow_copies(self, n: int) -> None:
        """N copies: n / DESTINATIONS syncs into the run's namespaces (configmapsync-operator)."""
        names = self.names
        if names.source_ns not in self.namespaces:
            self._namespace(names.source_ns)
            self.namespaces.extend(names.destinations)
            cms.create_namespaces(
                self.wide,
                names.destinations,
                {cms.NAMESPACE_LABEL: names.run_id, names.dest_label: "true"},
            )
        wanted = -(-n // DESTINATIONS)
        impl = IMPLEMENTATIONS["configmapsync"][0]
        process = impl.process(None, f"{names.prefix}-grow").start(self.timeout)
        try:
            for i in range(len(self.syncs), wanted):
                self._add_sync(f"settings-{i:02d}")
            copies = self.track_copies()
            try:
                copies.arm("copies", lambda _k, _s: True, wanted * DESTINATIONS).wait(self.timeout)
            finally:
                copies.stop()
        finally:
            process.stop()
        self.progress(f"{wanted * DESTINATIONS} copies written")

    def _add_sync(self, name: str) -> None:
        """A source ConfigMap (at the current tick) and a sync copying it to the destinations."""
        source_ns = self.names.source_ns
        body = cms._configmap(name, str(self.tick))
        read(request(self.api, "POST", resource_path("v1", "configmaps", source_ns), body=body))
        sync = cms._sync(
            name, name, namespaceSelector={"matchLabels": {self.names.dest_label: "true"}}
        )
        created = request_json(self.api, "POST", cms._sync_path(source_ns), body=sync)
        self.syncs.append(name)
        self.sync_uids.append(created["metadata"]["uid"])

    def resources(self, pair: str) -> list[dict[str, Any]]:
        """The custom resources of ``pair`` the run made (their status is measured)."""
        name = CRDS[pair][1]
        plural, group = name.split(".", 1)
        ns = self.names.source_ns if pair == "configmapsync" else self.names.pods_ns
        listed = request_json(self.api, "GET", resource_path(f"{group}/v1alpha1", plural, ns))
        return list(listed.get("items") or [])

    def cleanup(self) -> None:
        """Syncs, namespaces (their pods and copies), then the added nodes."""
        prefix = self.names.prefix
        for name in self.syncs:
            try:
                read(request(self.api, "DELETE", cms._sync_path(self.names.source_ns, name)))
            except ApiException as exc:
                if exc.status != 404:
                    self.progress(f"warning: sync {name}: {exc.status}")
        self.progress(f"deleting {len(self.namespaces)} namespaces {prefix}-*")
        left = cms.delete_namespaces(self.wide, self.namespaces, timeout=900.0)
        if left:
            self.progress(f"warning: {left} namespaces {prefix}-* still terminating")
        for name in self.nodes:
            try:
                read(request(self.api, "DELETE", resource_path("v1", "nodes", None, name)))
            except ApiException as exc:
                self.progress(f"warning: node {name}: {exc.status}")
