"""The planner for a SecretSync: the type kept, service-account tokens refused, no value in any
message (examples, and properties over random clusters of Secrets)."""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from configmapsync_operator.copies import Desired, slim
from configmapsync_operator.kinds import SECRETS
from configmapsync_operator.models import SERVICE_ACCOUNT_TOKEN
from configmapsync_operator.reconcile import Plan
from configmapsync_operator.requester import needs
from configmapsync_operator.status import CONFLICT, SECRET_TYPE_NOT_COPIED
from opsuite_testkit.configmapsync import (
    NAME,
    OTHER_UID,
    UID,
    World,
    condition,
    converge,
    make_world,
    namespace,
    secret,
    sync_object,
)

TLS = "kubernetes.io/tls"
DOCKER = "kubernetes.io/dockerconfigjson"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


CERT = {"tls.crt": b64("CERT"), "tls.key": b64("KEY")}


def test_a_tls_secret_is_copied_with_its_type_and_data() -> None:
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b", kind=SECRETS)
    world.add(secret("src", type_=TLS, data=CERT, allowed="*"))
    (write, _) = world.plan().writes
    copy = write.manifest
    assert (copy["kind"], copy["type"], copy["data"]) == ("Secret", TLS, CERT)
    assert "binaryData" not in copy
    converge(world)
    assert world.configmaps[("b", NAME)]["type"] == TLS
    assert condition(world, "Ready")["status"] == "True"


def test_a_changed_secret_is_patched_in_data_only() -> None:
    """A Secret has no binaryData: the patch replaces data and names no other content field."""
    world = make_world({"destinationNamespaces": ["a"]}, "a", kind=SECRETS)
    source = world.add(secret("src", type_=DOCKER, data={".dockerconfigjson": b64("{}")}))
    source["metadata"]["annotations"]["sync.opsuite.dev/allowed-namespaces"] = "a"
    converge(world)
    source["data"] = {".dockerconfigjson": b64('{"auths":{}}')}
    (write,) = world.plan().writes
    assert write.patch is not None
    assert set(write.patch) == {"metadata", "data"}
    world.apply(world.plan())
    assert world.configmaps[("a", NAME)]["data"] == source["data"]
    assert world.plan().is_empty


def test_key_filters_select_from_a_secret_s_data() -> None:
    world = make_world(
        {"destinationNamespaces": ["a"], "includeKeys": ["tls.crt"]}, "a", kind=SECRETS
    )
    world.add(secret("src", type_=TLS, data=CERT, allowed="*"))
    (write,) = world.plan().writes
    assert write.manifest["data"] == {"tls.crt": CERT["tls.crt"]}


def test_a_service_account_token_is_never_copied() -> None:
    """Nothing written or deleted, existing copies kept as they are, and the status says why
    without a word of the token."""
    world = make_world({"destinationNamespaces": ["a", "b"]}, "a", "b", kind=SECRETS)
    token = b64("eyJhbGciOi-planted-token")
    world.add(secret("src", type_=SERVICE_ACCOUNT_TOKEN, data={"token": token}, allowed="*"))
    world.add(secret("b", type_=SERVICE_ACCOUNT_TOKEN, data={"token": token}, owner=UID))
    actions = world.plan()
    assert (actions.writes, actions.deletes, actions.unmarks) == ((), (), ())
    world.apply(actions)
    degraded = condition(world, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", SECRET_TYPE_NOT_COPIED)
    assert SERVICE_ACCOUNT_TOKEN in degraded["message"]
    assert "Secret src/cfg" in degraded["message"]
    assert condition(world, "Ready")["status"] == "False"
    assert token not in json.dumps(world.sync["status"])
    assert world.plan().is_empty


def test_an_own_copy_of_another_type_is_replaced() -> None:
    """A Secret's type cannot change: the source deleted and made again with another type
    gets copies made again (delete with preconditions, then create)."""
    world = make_world({"destinationNamespaces": ["a"]}, "a", kind=SECRETS)
    world.add(secret("src", type_=TLS, data=CERT, allowed="*"))
    world.add(secret("a", type_="Opaque", data=CERT, owner=UID))
    world.configmaps[("a", NAME)]["metadata"]["annotations"]["sync.opsuite.dev/source"] = "src/cfg"
    (write,) = world.plan().writes
    assert (write.verb, write.manifest["type"]) == ("replace", TLS)


def test_an_unmanaged_secret_of_another_type_is_not_taken_over() -> None:
    world = make_world(
        {"destinationNamespaces": ["a", "b"], "conflictPolicy": "Overwrite"}, "a", "b", kind=SECRETS
    )
    world.add(secret("src", type_=TLS, data=CERT, allowed="*"))
    world.add(secret("a", type_="Opaque", data={"x": b64("theirs")}))
    world.add(secret("b", type_=TLS, data={"tls.crt": b64("old")}))
    actions = world.plan()
    assert [(w.namespace, w.verb) for w in actions.writes] == [("b", "update")]
    (issue,) = actions.outcome.issues
    assert (issue.namespace, issue.reason) == ("a", CONFLICT)
    assert "type Opaque" in issue.message
    assert f"type {TLS}" in issue.message


def test_the_requester_must_read_the_secret_and_write_secrets() -> None:
    world = make_world({"destinationNamespaces": ["a"]}, "a", kind=SECRETS)
    world.add(secret("src", type_=TLS, data=CERT, allowed="*"))
    accesses = needs(world.sync, world.plan(), SECRETS)
    assert {a.resource for a in accesses} == {"secrets"}
    assert accesses[0].namespace == "src"
    assert accesses[0].verb == "get"
    assert {(a.namespace, a.verb) for a in accesses[1:]} == {
        ("a", "create"),
        ("a", "update"),
        ("a", "delete"),
    }


def test_a_secret_record_keeps_its_type_and_no_value() -> None:
    obj = secret("a", type_=TLS, data={"tls.key": b64("private")}, owner=OTHER_UID)
    record = slim(obj)
    assert record["type"] == TLS
    assert b64("private") not in json.dumps(record)
    desired = Desired(sync_object({"secretName": NAME}), secret("src", type_=TLS), kind=SECRETS)
    assert desired.retypes(slim(secret("a", type_="Opaque")))
    assert not desired.retypes(record)


# --- properties -----------------------------------------------------------------------------

PLANTED = "pl4nted-v4lue"
"""A value planted in every Secret: no message may contain it, plain or base64-encoded."""
TYPES = st.sampled_from(["Opaque", TLS, DOCKER, SERVICE_ACCOUNT_TOKEN])
NAMESPACES = ("src", "a", "b", "c")


@st.composite
def secret_worlds(draw: st.DrawFn) -> World:
    spec: dict[str, object] = {
        "destinationNamespaces": draw(st.lists(st.sampled_from(NAMESPACES), unique=True)),
        "conflictPolicy": draw(st.sampled_from(["Skip", "Overwrite"])),
        **draw(st.sampled_from([{}, {"includeKeys": ["k", "missing"]}, {"excludeKeys": ["k"]}])),
    }
    if not spec["destinationNamespaces"] or draw(st.booleans()):
        spec["namespaceSelector"] = {}
    world = World(sync_object({"secretName": NAME, **spec}), kind=SECRETS)
    for ns in NAMESPACES:
        if ns == "src" or draw(st.booleans()):
            world.namespaces[ns] = namespace(ns, accept=draw(st.sampled_from(["*", None, "x"])))
        present = draw(st.sampled_from(["none", "unowned", "mine", "other"]))
        if ns == "src" and present == "mine":
            present = "unowned"
        if present == "none":
            continue
        value = draw(st.sampled_from([PLANTED, f"{PLANTED}\n", f"user:{PLANTED}"]))
        world.add(
            secret(
                ns,
                type_=draw(TYPES),
                data={draw(st.sampled_from(["k", "x"])): b64(value)},
                owner={"unowned": None, "mine": UID, "other": OTHER_UID}[present],
                immutable=draw(st.booleans()),
                allowed=draw(st.sampled_from(["*", None, "a,c"])),
            )
        )
        if present == "mine":
            world.configmaps[(ns, NAME)]["metadata"]["annotations"]["sync.opsuite.dev/source"] = (
                f"src/{NAME}"
            )
    return world


def messages(actions: Plan) -> str:
    """Everything a plan says to people: the status it writes and its issues."""
    said = [json.dumps(actions.status_patch or {})]
    said += [i.message for i in actions.outcome.issues]
    if actions.outcome.blocked is not None:
        said.append(actions.outcome.blocked[1])
    return "\n".join(said)


def _leaks(text: str) -> bool:
    encoded = [b64(v) for v in (PLANTED, f"{PLANTED}\n", f"user:{PLANTED}")]
    return PLANTED in text or any(e in text for e in encoded)


@settings(max_examples=200, deadline=None)
@given(world=secret_worlds())
def test_no_value_appears_in_any_message_and_tokens_are_never_written(world: World) -> None:
    for _ in range(3):
        actions = world.plan()
        assert not _leaks(messages(actions))
        source = world.configmaps.get(world.source_key)
        for write in actions.writes:
            assert source is not None
            assert source["type"] != SERVICE_ACCOUNT_TOKEN
            assert write.manifest["type"] == source["type"]  # the type is kept
            assert "binaryData" not in write.manifest
            assert "stringData" not in write.manifest
        if actions.is_empty:
            return
        world.apply(actions)
    assert not _leaks(json.dumps(world.sync.get("status") or {}))
