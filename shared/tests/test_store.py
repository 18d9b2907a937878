"""The watch cache keeps objects without managedFields, or as its transform makes them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from opsuite_common.store import (
    Store,
    resource_version_order,
    status_only,
    without_managed_fields,
)


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


def test_a_store_keeps_what_its_transform_returns_and_indexes_it() -> None:
    store = Store(
        "pods",
        {"uid": lambda o: [o["metadata"].get("uid")]},
        transform=lambda o: {"metadata": o["metadata"]},
    )
    store.apply(None, _pod("a", uid="1"))
    assert store.get("ns", "a") == {"metadata": {"name": "a", "namespace": "ns", "uid": "1"}}
    assert store.by_index("uid", "1") == [store.get("ns", "a")]
    previous = store.apply("MODIFIED", _pod("a", uid="2"))
    assert previous == {"metadata": {"name": "a", "namespace": "ns", "uid": "1"}}
    assert store.by_index("uid", "1") == []


def test_only_status_changes_are_told_apart() -> None:
    old = _pod("a", uid="1", resourceVersion="8")
    meta = {"name": "a", "namespace": "ns", "uid": "1"}
    ours = {**old, "metadata": {**meta, "resourceVersion": "9"}, "status": {"x": 1}}
    assert status_only(old, ours)
    respecced = {**old, "spec": {"x": 2}}
    assert not status_only(old, respecced)
    deleting = {**old, "metadata": {**meta, "deletionTimestamp": "2025-01-01T00:00:00Z"}}
    assert not status_only(old, deleting)
    assert not status_only(None, old)


@given(st.integers(min_value=1), st.integers(min_value=1))
def test_resource_versions_compare_as_the_integers_they_are(a: int, b: int) -> None:
    """KEP-5504: positive integers without leading zeros, of any length."""
    assert resource_version_order(str(a), str(b)) == (a > b) - (a < b)


def test_resource_versions_that_are_not_such_integers_do_not_compare() -> None:
    for a, b in (("0", "1"), ("012", "13"), ("abc", "1"), ("", "1"), ("1", "-2"), ("1.5", "2")):
        assert resource_version_order(a, b) is None
        assert resource_version_order(b, a) is None


def test_only_a_cached_object_newer_than_the_one_offered_makes_it_outdated() -> None:
    store = Store("configmaps")

    def version(rv: str | None, name: str = "cfg") -> dict[str, object]:
        meta = {"namespace": "ns", "name": name}
        return {"metadata": meta if rv is None else {**meta, "resourceVersion": rv}}

    assert not store.outdated(version("5"))  # nothing cached
    store.apply("MODIFIED", version("20"))
    assert store.outdated(version("9"))
    assert not store.outdated(version("20"))
    assert not store.outdated(version("21"))
    assert not store.outdated(version("9", name="other"))
    assert not store.outdated(version(None))
    assert not store.outdated(version("opaque"))


def test_an_own_write_answer_is_kept_unless_newer_is_cached_or_the_object_is_gone() -> None:
    """#19: a pass that writes a status and the next pass, before the watch's event of that
    write: the next one must compare with the status the server now holds."""
    store = Store("podsets")
    store.apply(None, {"metadata": {"namespace": "n", "name": "a", "resourceVersion": "5"}})
    answer = {"metadata": {"namespace": "n", "name": "a", "resourceVersion": "7"}, "status": 1}
    store.record_write(answer)
    assert store.get("n", "a") == answer
    store.record_write({"metadata": {"namespace": "n", "name": "a", "resourceVersion": "6"}})
    assert store.get("n", "a") == answer  # the cache holds a newer version
    store.apply("DELETED", answer)
    store.record_write(answer)
    assert store.get("n", "a") is None  # never brought back
