"""The manager's hand-off to kopf, without a cluster."""

from __future__ import annotations

import getpass
import json
from pathlib import Path
from typing import Any

import kopf
import pytest
from kubernetes.config import kube_config

from opsuite_common.manager import Manager
from opsuite_common.options import ManagerOptions
from opsuite_common.store import JSON, Store


def _options() -> ManagerOptions:
    return ManagerOptions(
        leader_elect=False,
        leader_election_id="test",
        leader_election_namespace=None,
        metrics_bind_address="0",
        health_probe_bind_address="0",
        namespaces=("ns",),
        log_format="text",
        log_level="info",
        max_concurrent_reconciles=1,
        watch_timeout=60,
    )


def _kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    user = {"name": "u", "user": {"token": "t"}}
    context = {"name": "x", "context": {"cluster": "c", "user": "u"}}
    config = {"clusters": [cluster], "users": [user], "contexts": [context]}
    path.write_text(json.dumps({**config, "current-context": "x"}))
    return path


async def test_kopf_gets_the_identity_so_no_passwd_entry_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The images run as uid 65532, which has no passwd entry: kopf must not look the user up
    (getpass.getuser raises KeyError there) but use the manager's identity."""

    def no_passwd_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 65532")

    seen: dict[str, Any] = {}

    async def operator(**kwargs: Any) -> None:
        seen.update(kwargs)
        if kwargs.get("identity") is None:
            getpass.getuser()  # what kopf does without an identity

    # The client reads KUBECONFIG once, when it is imported.
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(_kubeconfig(tmp_path)))
    monkeypatch.setenv("POD_NAME", "operator-pod-1")
    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    monkeypatch.setattr(kopf, "operator", operator)
    manager = Manager("test-operator", _options())
    await manager.lead()
    assert seen["identity"] == "operator-pod-1"


def test_a_relisting_prunes_the_store_and_reports_each_pruned_object_as_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects deleted while a watch was down (no DELETED event) leave the cache at the end of
    the next listing and reach the handler as DELETED events; the listing of one namespace
    prunes nothing in another."""
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(_kubeconfig(tmp_path)))
    manager = Manager("test-operator", _options())
    store = Store("pods")
    seen: list[tuple[str | None, str, bool]] = []

    def on_event(event_type: str | None, obj: JSON, old: JSON | None) -> None:
        seen.append((event_type, obj["metadata"]["name"], old is not None))

    manager.watch("", "v1", "pods", store=store, on_event=on_event)
    assert manager.cache("pods") is store
    deliver = manager._routes[("", "pods")]
    for namespace, name in (("ns", "kept"), ("ns", "gone"), ("other", "elsewhere")):
        deliver({"type": None, "object": {"metadata": {"namespace": namespace, "name": name}}})
    seen.clear()
    manager.activity.listed("pods", "ns", {("ns", "kept")})
    assert store.cached_keys() == {("ns", "kept"), ("other", "elsewhere")}
    assert seen == [("DELETED", "gone", True)]
