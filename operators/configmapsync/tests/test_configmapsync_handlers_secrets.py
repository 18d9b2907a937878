"""SecretSync's wiring without a cluster: served only with ``--secrets``, and otherwise never a
watch or a request on Secrets, only a status saying why (SecretsNotEnabled)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from configmapsync_operator.__main__ import split_args, wire
from configmapsync_operator.handlers import setup
from configmapsync_operator.models import (
    ACCEPT_FROM_ANNOTATION,
    ALLOWED_NAMESPACES_ANNOTATION,
    GROUP,
    OWNER_LABEL,
    SECRET_PLURAL,
)
from configmapsync_operator.status import SECRETS_NOT_ENABLED
from opsuite_common.kube import ApiException
from opsuite_common.store import JSON, ObjectKey
from opsuite_testkit import WiredOperator, offline_manager

SYNC: ObjectKey = ("src", "pull")


def _sync(**spec: object) -> JSON:
    return {
        "metadata": {"namespace": SYNC[0], "name": SYNC[1], "uid": "sync-uid", "generation": 3},
        "spec": {"secretName": "registry", **spec},
    }


class _Kube:
    """Answers at once: GETs find the source Secret, writes succeed; records every request."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, object]] = []

    def _answer(self, method: str, path: str, body: object, answer: JSON) -> asyncio.Future[JSON]:
        self.sent.append((method, path, body))
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        future.set_result(answer)
        return future

    async def get(self, path: str) -> JSON | None:
        self.sent.append(("GET", path, None))
        return _secret("src", "registry")

    def create(self, path: str, body: JSON) -> asyncio.Future[JSON]:
        meta = {**body["metadata"], "uid": "new", "resourceVersion": "9"}
        return self._answer("POST", path, body, {**body, "metadata": meta})

    def patch(self, path: str, patch: JSON, **_: object) -> asyncio.Future[JSON]:
        return self._answer("PATCH", path, patch, {})


def _secret(namespace: str, name: str) -> JSON:
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"secret-{namespace}",
            "resourceVersion": "1",
            "annotations": {ALLOWED_NAMESPACES_ANNOTATION: "*"},
        },
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": "e30="},
    }


def _namespace(name: str, labels: dict[str, str] | None = None) -> JSON:
    return {
        "metadata": {
            "name": name,
            "uid": f"ns-{name}",
            "labels": labels or {},
            "annotations": {ACCEPT_FROM_ANNOTATION: "*"},
        }
    }


def _wired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secrets: bool) -> WiredOperator:
    manager = offline_manager("configmapsync-operator", (), tmp_path, monkeypatch)
    setup(manager, secrets=secrets)
    return WiredOperator(manager, "secretsync")


async def test_without_the_flag_secrets_are_never_watched_and_the_status_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wired = _wired(tmp_path, monkeypatch, secrets=False)
    assert wired.manager.route("", "secrets") is None
    assert wired.manager.route("", "configmaps") is not None
    kube = _Kube()
    wired.manager.kube = kube  # type: ignore[assignment]
    wired.event(GROUP, SECRET_PLURAL, None, _sync(destinationNamespaces=["a"]))
    assert wired.enqueued == [SYNC]
    await wired.controller._reconcile(SYNC)
    ((method, path, body),) = kube.sent
    assert (method, path) == (
        "PATCH",
        f"/apis/{GROUP}/v1alpha1/namespaces/src/secretsyncs/pull/status",
    )
    assert isinstance(body, dict)
    status = body["status"]
    assert status["observedGeneration"] == 3
    assert status["source"] == "src/registry"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Degraded"]["status"] == "True"
    assert conditions["Ready"]["reason"] == SECRETS_NOT_ENABLED
    assert "secrets.enabled" in conditions["Ready"]["message"]
    # Steady state is quiet: once the status says so, a pass writes nothing.
    kube.sent.clear()
    wired.event(GROUP, SECRET_PLURAL, "MODIFIED", {**_sync(destinationNamespaces=["a"]), **body})
    await wired.controller._reconcile(SYNC)
    assert kube.sent == []


async def test_with_the_flag_a_secretsync_copies_its_secret_type_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wired = _wired(tmp_path, monkeypatch, secrets=True)
    assert wired.manager.route("", "secrets") is not None
    kube = _Kube()
    wired.manager.kube = kube  # type: ignore[assignment]
    for ns in ("src", "a"):
        wired.event("", "namespaces", None, _namespace(ns))
    wired.event(GROUP, SECRET_PLURAL, None, _sync(destinationNamespaces=["a"]))
    await wired.controller._reconcile(SYNC)
    created = [(path, body) for method, path, body in kube.sent if method == "POST"]
    ((path, body),) = created
    assert path == "/api/v1/namespaces/a/secrets"
    assert isinstance(body, dict)
    assert body["kind"] == "Secret"
    assert body["type"] == "kubernetes.io/dockerconfigjson"
    assert body["metadata"]["labels"][OWNER_LABEL] == "sync-uid"
    assert ("GET", "/api/v1/namespaces/src/secrets/registry", None) in kube.sent


def test_a_namespace_labelled_enqueues_the_secretsyncs_selecting_by_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One namespace watch serves both kinds."""
    wired = _wired(tmp_path, monkeypatch, secrets=True)
    wired.event(GROUP, SECRET_PLURAL, None, _sync(namespaceSelector={"matchLabels": {"x": "y"}}))
    wired.enqueued.clear()
    wired.event("", "namespaces", None, _namespace("b", {"x": "y"}))
    assert wired.enqueued == [SYNC]


@pytest.mark.parametrize(
    ("argv", "environ", "secrets"),
    [
        ([], {}, False),
        (["--secrets"], {}, True),
        (["--secrets=false"], {"OPSUITE_SECRETS": "true"}, False),
        ([], {"OPSUITE_SECRETS": "true"}, True),
    ],
)
def test_the_secrets_flag_and_its_variable(
    argv: list[str], environ: dict[str, str], secrets: bool
) -> None:
    assert split_args([*argv, "--namespace=a"], environ) == (secrets, ["--namespace=a"])


class _Discovery:
    """Answers the API group's discovery with ``resources`` (None: 404, no CRD of the group)."""

    def __init__(self, resources: list[str] | None) -> None:
        self.resources = resources

    def request(self, method: str, path: str, **_: object) -> asyncio.Future[JSON]:
        assert (method, path) == ("GET", f"/apis/{GROUP}/v1alpha1")
        future: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        if self.resources is None:
            future.set_exception(ApiException(404, "Not Found"))
        else:
            future.set_result({"resources": [{"name": r} for r in self.resources]})
        return future


@pytest.mark.parametrize("secrets", [False, True])
@pytest.mark.parametrize(
    ("resources", "watched"),
    [(["configmapsyncs", "secretsyncs"], True), (["configmapsyncs"], False), (None, False)],
)
async def test_without_the_secretsync_crd_nothing_waits_for_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    secrets: bool,
    resources: list[str] | None,
    watched: bool,
) -> None:
    """An upgrade whose CRDs were not applied: ConfigMapSyncs go on, SecretSyncs are not
    watched (their watch would hold every pass back until it listed)."""
    manager = offline_manager("configmapsync-operator", (), tmp_path, monkeypatch)
    monkeypatch.setattr(manager.kube, "request", _Discovery(resources).request)
    await wire(manager, secrets=secrets)
    assert (manager.route(GROUP, SECRET_PLURAL) is not None) is watched
    assert (manager.route("", "secrets") is not None) is (watched and secrets)
    assert manager.route(GROUP, "configmapsyncs") is not None
