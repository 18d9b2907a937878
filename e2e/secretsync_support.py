"""Helpers for the SecretSync e2e tests: the namespaces, Secret and SecretSync access, and what
the operator asked of the API server about Secrets.

A SecretSync pool is a ConfigMapSync pool (e2e.configmapsync_support) of its own prefix, so
the two kinds' tests never share namespaces, and its operator runs with the flags the test
module gives (``--secrets`` or not).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import CHARTS, service_account_user
from e2e.cluster import Cluster, audit_events
from e2e.configmapsync_support import ALLOWED, SECRET_RESOURCE, Pool
from e2e.resources import CustomObjects


class SecretPool(Pool):
    """The namespaces of one run of a SecretSync module, its operator serving SecretSyncs."""

    RESOURCE = SECRET_RESOURCE
    PREFIX = "sec"
    FLAGS = ("--secrets", "--log-level=debug")
    """Debug logs: the most the operator ever says, for the tests that grep it for a value."""


def encoded(values: dict[str, str]) -> dict[str, str]:
    """A Secret's ``data`` holding ``values``."""
    return {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}


def secret_sync_manifest(name: str, secret: str, **spec: Any) -> dict[str, Any]:
    """A SecretSync manifest; ``spec`` keys are the API's camelCase fields."""
    return SECRET_RESOURCE.manifest(name, {"secretName": secret, **spec})


class SecretSyncs(CustomObjects):
    """SecretSync and Secret access; deletes the syncs it created when the block ends."""

    def __init__(self, api: client.ApiClient) -> None:
        super().__init__(api, SECRET_RESOURCE)

    def wait_ready(self, namespace: str, name: str, synced: int, timeout: float = 60) -> Any:
        """Wait for Ready=True with ``synced`` destinations in sync."""
        return self.wait_ready_with(namespace, name, "syncedNamespaces", synced, timeout)

    def __exit__(self, *_exc: object) -> None:
        self.cleanup(wait=True)

    def put_secret(
        self,
        namespace: str,
        name: str,
        values: dict[str, str],
        kind: str = "Opaque",
        *,
        allowed: str | None = "*",
        annotations: dict[str, str] | None = None,
    ) -> client.V1Secret:
        """Create a Secret of type ``kind`` holding ``values``, or replace the one there; a
        source allowing copies where ``allowed`` says (None: no consent annotation)."""
        notes = {**({ALLOWED: allowed} if allowed is not None else {}), **(annotations or {})}
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, annotations=notes or None),
            type=kind,
            data=encoded(values),
        )
        try:
            return self.core.create_namespaced_secret(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
        return self.core.replace_namespaced_secret(name, namespace, body)

    def secret(self, namespace: str, name: str) -> client.V1Secret | None:
        try:
            return self.core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


@dataclass(frozen=True)
class SecretRequest:
    """One request of the operator about Secrets, as the audit log recorded it."""

    verb: str
    namespace: str
    name: str
    code: int


def secret_requests(cluster: Cluster, pool: SecretPool) -> list[SecretRequest]:
    """The requests on Secrets of the pool's operator (a watch from its start, the others once
    completed): made as its chart's identity,
    and carrying the pool's identity in their User-Agent or (kopf's watches) in one of the
    pool's namespaces."""
    assert cluster.audit_log is not None
    user = service_account_user(CHARTS[pool.COMMAND])
    namespaces = set(pool.all())
    return [
        SecretRequest(
            e["verb"],
            e["objectRef"].get("namespace", ""),
            e["objectRef"].get("name", ""),
            int(e.get("responseStatus", {}).get("code", 0)),
        )
        for e in audit_events(cluster.audit_log, needle=json.dumps(user))
        if e.get("stage") in ("ResponseStarted", "ResponseComplete")  # a watch: started
        and e["user"]["username"] == user
        and e.get("objectRef", {}).get("resource") == "secrets"
        and (
            pool.identity in e.get("userAgent", "") or e["objectRef"].get("namespace") in namespaces
        )
    ]
