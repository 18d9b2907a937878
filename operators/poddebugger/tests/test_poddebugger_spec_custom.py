"""spec.env valueFrom and spec.volumeMounts (kubectl debug --custom): the container they make,
the pods that cannot take it, what the requester must be allowed, and that the merge with the
profile never widens the profile's securityContext."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from opsuite_common.protodecode import WatchDecoder
from opsuite_common.requester import Access
from opsuite_packaging.crd import structural_schema
from opsuite_testkit import from_schema
from opsuite_testkit.protobuf import watch_frame
from poddebugger_operator.actions import WATCHED_FIELDS, slim_pod
from poddebugger_operator.models import PodDebuggerSpec
from poddebugger_operator.mounts import VOLUME_NOT_ALLOWED, VOLUME_NOT_FOUND, holds_credentials
from poddebugger_operator.reconcile import plan
from poddebugger_operator.requester import needs
from poddebugger_operator.spec import (
    CUSTOM_FIELDS,
    container_body,
    merge,
    parse_spec,
    security_context,
)
from poddebugger_operator.status import INJECTION_FAILED

NOW = datetime(2026, 1, 1, tzinfo=UTC)
POD = "k8s.io.api.core.v1.Pod"
SECRET_REF = {"secretKeyRef": {"name": "db", "key": "password"}}
MAP_REF = {"configMapKeyRef": {"name": "cfg", "key": "mode"}}
SECRET_ENV = {"name": "TOKEN", "valueFrom": SECRET_REF}
MAP_ENV = {"name": "MODE", "valueFrom": MAP_REF}
MOUNT = {"name": "data", "mountPath": "/mnt/x", "readOnly": True}


def debugger(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "dbg", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "image": "busybox", **spec},
    }


def pod(name: str, **volumes: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"app": "web"},
        },
        "spec": {
            "containers": [{"name": "main"}],
            "volumes": [{"name": n, **source} for n, source in volumes.items()],
        },
        "status": {"phase": "Running"},
    }


def test_env_value_from_and_mounts_reach_the_container_under_the_profile() -> None:
    spec = parse_spec(debugger(env=[SECRET_ENV, MAP_ENV], volumeMounts=[MOUNT]))
    body = container_body(spec)
    assert body["env"] == [SECRET_ENV, MAP_ENV]
    assert body["volumeMounts"] == [MOUNT]
    assert body["securityContext"] == security_context("restricted")


def test_a_spec_without_the_new_fields_keeps_its_container_and_name() -> None:
    body = container_body(parse_spec(debugger(env=[{"name": "A", "value": "b"}])))
    assert body == {
        "image": "busybox",
        "env": [{"name": "A", "value": "b"}],
        "securityContext": security_context("restricted"),
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"name": "A", "value": "x", "valueFrom": SECRET_REF}, "not both"),
        ({"name": "A", "valueFrom": {}}, "exactly one"),
        (
            {"name": "A", "valueFrom": {**SECRET_REF, **MAP_REF}},
            "exactly one",
        ),
    ],
)
def test_an_env_variable_takes_one_value(env: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PodDebuggerSpec.model_validate(
            {"selector": {"matchLabels": {"a": "b"}}, "image": "x", "env": [env]}
        )


@pytest.mark.parametrize("sub_path", ["..", "a/../b", "/etc", "a//b", "../x"])
def test_a_sub_path_stays_inside_the_volume(sub_path: str) -> None:
    mount = {**MOUNT, "subPath": sub_path}
    with pytest.raises(ValidationError):
        PodDebuggerSpec.model_validate(
            {"selector": {"matchLabels": {"a": "b"}}, "image": "x", "volumeMounts": [mount]}
        )


def test_pods_lacking_the_volume_or_holding_credentials_in_it_are_reported_not_sent() -> None:
    pods = [
        pod("a", data={"emptyDir": {}}),
        pod("b", other={"emptyDir": {}}),
        pod("c", data={"secret": {"secretName": "db"}}),
        pod("d", data={"projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
        pod("e", data={"csi": {"driver": "secrets-store.csi.k8s.io"}}),
        pod("f", data={"projected": {"sources": [{"downwardAPI": {"items": []}}]}}),
        pod("g", data={"persistentVolumeClaim": {"claimName": "c"}}),
    ]
    actions = plan(debugger(volumeMounts=[MOUNT]), pods, NOW)
    assert sorted(i.pod_name for i in actions.injections) == ["a", "f", "g"]
    assert all(i.container["volumeMounts"] == [MOUNT] for i in actions.injections)
    reasons = {f.pod: (f.reason, f.message) for f in actions.unfit}
    assert reasons["b"] == (VOLUME_NOT_FOUND, "the pod has no volume data (spec.volumeMounts)")
    assert {p: r for p, (r, _) in reasons.items()} == {
        "b": VOLUME_NOT_FOUND,
        "c": VOLUME_NOT_ALLOWED,
        "d": VOLUME_NOT_ALLOWED,
        "e": VOLUME_NOT_ALLOWED,
    }
    status = actions.status_patch
    assert status is not None
    assert [(f["pod"], f["reason"]) for f in status["failedPods"]] == [
        ("b", VOLUME_NOT_FOUND),
        ("c", VOLUME_NOT_ALLOWED),
        ("d", VOLUME_NOT_ALLOWED),
        ("e", VOLUME_NOT_ALLOWED),
    ]
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", INJECTION_FAILED)
    unfit = pods[1:5]  # alone: a second pass sends nothing, announces nothing, writes nothing
    first = plan(debugger(volumeMounts=[MOUNT]), unfit, NOW)
    again = plan({**debugger(volumeMounts=[MOUNT]), "status": first.status_patch}, unfit, NOW)
    assert (again.injections, again.unfit, again.status_patch) == ((), (), None)


def test_the_requester_must_be_allowed_to_get_each_secret_and_config_map_the_env_reads() -> None:
    made = debugger(env=[SECRET_ENV, MAP_ENV, {**SECRET_ENV, "name": "AGAIN"}])
    assert needs(made) == [
        Access("ns", "patch", "pods", "ephemeralcontainers"),
        Access("ns", "get", "secrets", name="db"),
        Access("ns", "get", "configmaps", name="cfg"),
    ]
    assert needs(debugger(env=[{"name": "A", "value": "b"}])) == [
        Access("ns", "patch", "pods", "ephemeralcontainers")
    ]


WIDENING = st.dictionaries(
    st.sampled_from(
        sorted(CUSTOM_FIELDS | {"securityContext", "resources", "ports", "lifecycle", "privileged"})
    ),
    st.just({"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}, "runAsUser": 0}),
)
PROFILES = st.sampled_from(["general", "baseline", "restricted", "netadmin", "sysadmin"])


@settings(max_examples=200, deadline=None)
@given(custom=WIDENING, profile=PROFILES, uid=st.sampled_from([None, 1000]))
def test_the_merge_never_widens_the_profiles_security_context(
    custom: dict[str, Any], profile: str, uid: int | None
) -> None:
    context = security_context(profile, uid)  # type: ignore[arg-type]
    body = merge(custom, context)
    assert body.get("securityContext") == context
    assert set(body) <= CUSTOM_FIELDS | {"securityContext"}
    assert {k: v for k, v in body.items() if k != "securityContext"} == {
        k: v for k, v in custom.items() if k in CUSTOM_FIELDS
    }


SPECS = from_schema(structural_schema(PodDebuggerSpec))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=SPECS)
def test_every_valid_spec_gets_exactly_its_profiles_security_context(raw: dict[str, Any]) -> None:
    try:
        spec = PodDebuggerSpec.model_validate(raw, strict=True)
    except ValidationError:
        return  # CEL rules aside, the schema admits some specs the API server refuses
    body = container_body(spec)
    assert body.get("securityContext") == security_context(spec.profile, spec.run_as_user)
    assert set(body) <= CUSTOM_FIELDS | {"securityContext"}
    mounts = {m["name"] for m in body.get("volumeMounts", ())}
    assert mounts == {m.name for m in spec.volume_mounts or ()}


VOLUMES = [
    {"name": "a", "emptyDir": {}},
    {"name": "b", "secret": {"secretName": "db"}},
    {"name": "c", "csi": {"driver": "secrets-store.csi.k8s.io"}},
    {"name": "d", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    {
        "name": "e",
        "projected": {"sources": [{"configMap": {"optional": True}}, {"downwardAPI": {}}]},
    },
    {"name": "f", "projected": {}},
    {"name": "g", "persistentVolumeClaim": {"claimName": "c"}},
]


def test_the_pod_cache_keeps_what_the_volume_check_reads_as_the_protobuf_watch_decodes_it() -> None:
    """The pod watch decodes volumes (Volume inlines VolumeSource) to what slim_pod keeps, and
    the credential check reads the slim record as it reads the whole pod."""
    whole = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "main", "image": "i"}], "volumes": VOLUMES},
    }
    decoded = WatchDecoder(POD, WATCHED_FIELDS).decode(watch_frame("ADDED", whole, POD)[4:])
    slim = slim_pod(decoded["object"])
    assert slim["spec"]["volumes"] == slim_pod(whole)["spec"]["volumes"]
    judged = {v["name"]: holds_credentials(v) for v in slim["spec"]["volumes"]}
    assert judged == {v["name"]: holds_credentials(v) for v in VOLUMES}
    assert judged == {
        "a": False,
        "b": True,
        "c": True,
        "d": True,
        "e": False,
        "f": False,
        "g": False,
    }
