"""A ConfigMapSync fan-out of one test run: a work namespace, a source namespace holding the
ConfigMap ``cfg``, and destination namespaces labelled for the sync's selector, all named
``<kind>-<run>-*`` so that nothing of tests running alongside is touched (e2e/test_chaos.py,
e2e/test_network_faults.py)."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field
from typing import Self

from kubernetes import client

from e2e import configmapsync_support
from e2e.cluster import wait_until

SYNC = "fan"


@dataclass
class FanOut:
    """The run's namespaces and the ConfigMapSync ``fan`` from ``cfg`` to its destinations."""

    api: client.ApiClient
    destinations: int
    kind: str
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    @property
    def prefix(self) -> str:
        return f"{self.kind}-{self.run}-"

    @property
    def work(self) -> str:
        return f"{self.prefix}work"

    @property
    def source(self) -> str:
        return f"{self.prefix}src"

    @property
    def label(self) -> str:
        """The label (value ``true``) of the destinations, which the sync selects."""
        return f"{self.prefix}dest"

    def destination_names(self) -> list[str]:
        return [f"{self.prefix}d{i}" for i in range(self.destinations)]

    def namespace_flags(self) -> list[str]:
        """--namespace for each of the run's namespaces: an operator serving only them never
        touches the objects of tests running alongside on a shared cluster."""
        return [f"--namespace={ns}" for ns in (self.work, self.source, *self.destination_names())]

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def create(self) -> Self:
        """The namespaces (once the work one has its default ServiceAccount) and ``cfg``."""
        destinations = set(self.destination_names())
        for ns in (self.work, self.source, *self.destination_names()):
            labels = {self.label: "true"} if ns in destinations else {}
            accept = {configmapsync_support.ACCEPT: self.source}
            self.core.create_namespace(
                {"metadata": {"name": ns, "labels": labels, "annotations": accept}}
            )
        wait_until(
            lambda: self.core.read_namespaced_service_account("default", self.work),
            bool,
            timeout=60,
            what="the work namespace's default ServiceAccount",
        )
        self.core.create_namespaced_config_map(
            self.source,
            {
                "metadata": {"name": "cfg", "annotations": {configmapsync_support.ALLOWED: "*"}},
                "data": {"value": "initial"},
            },
        )
        return self

    def delete(self) -> None:
        for ns in (self.work, self.source, *self.destination_names()):
            with contextlib.suppress(client.ApiException):
                self.core.delete_namespace(ns, propagation_policy="Background")

    def set_source(self, value: str) -> None:
        self.core.patch_namespaced_config_map("cfg", self.source, {"data": {"value": value}})

    @property
    def _syncs(self) -> configmapsync_support.Syncs:
        return configmapsync_support.Syncs(self.api)

    def create_sync(self) -> None:
        body = configmapsync_support.sync_manifest(
            SYNC, "cfg", namespaceSelector={"matchLabels": {self.label: "true"}}
        )
        self._syncs.create(self.source, body)

    def delete_sync(self) -> None:
        self._syncs.delete(self.source, SYNC)

    def has_sync(self) -> bool:
        """Whether the ConfigMapSync exists."""
        return self._syncs.exists(self.source, SYNC)

    def copies(self) -> list[client.V1ConfigMap]:
        """The copies in the run's namespaces."""
        items: list[client.V1ConfigMap] = self.core.list_config_map_for_all_namespaces(
            label_selector=configmapsync_support.OWNER_LABEL
        ).items
        return [c for c in items if c.metadata.namespace.startswith(self.prefix)]

    def copies_equal(self, value: str) -> int:
        """Copies holding ``value``; fails when a copy exists outside the destinations."""
        found = self.copies()
        assert {c.metadata.namespace for c in found} <= set(self.destination_names())
        return sum((c.data or {}).get("value") == value for c in found)

    def wait_copies(self, value: str, count: int, timeout: float = 180) -> None:
        wait_until(
            lambda: (len(self.copies()), self.copies_equal(value)),
            lambda seen: seen == (count, count),
            timeout=timeout,
            what=f"{count} copies of {value!r}",
        )
