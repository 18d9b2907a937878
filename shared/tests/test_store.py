"""The watch cache keeps objects without managedFields."""

from __future__ import annotations

from opsuite_common.store import Store, without_managed_fields


def _pod(name: str, **meta: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", **meta}, "spec": {"x": 1}}


def test_stored_objects_lose_managed_fields_only() -> None:
    store = Store("pods")
    event = _pod("a", uid="1", managedFields=[{"manager": "kwok"}])
    store.apply("ADDED", event)
    cached = store.get("ns", "a")
    assert cached == _pod("a", uid="1")
    assert event["metadata"]["managedFields"] == [{"manager": "kwok"}]  # type: ignore[index]
    assert store.apply("DELETED", event) == cached
    assert len(store) == 0


def test_an_object_without_managed_fields_is_kept_as_is() -> None:
    pod = _pod("b")
    assert without_managed_fields(pod) is pod
    assert without_managed_fields({"kind": "List"}) == {"kind": "List"}
