"""Expectations: record before acting, observe from watch events, expire after the TTL."""

from datetime import UTC, datetime, timedelta

from podset_operator.expectations import EXPECTATIONS_TTL, Expectations

T0 = datetime(2025, 1, 1, tzinfo=UTC)
KEY = "ns/web"


def test_unknown_key_is_satisfied() -> None:
    assert Expectations().satisfied(KEY, T0)


def test_creates_must_all_be_observed() -> None:
    exp = Expectations()
    exp.expect(KEY, creates=2, deletes=(), now=T0)
    assert not exp.satisfied(KEY, T0)
    exp.creation_observed(KEY)
    assert not exp.satisfied(KEY, T0)
    exp.creation_observed(KEY)
    assert exp.satisfied(KEY, T0)


def test_skipped_creates_are_lowered_in_bulk() -> None:
    exp = Expectations()
    exp.expect(KEY, creates=7, deletes=(), now=T0)
    exp.creation_observed(KEY)  # first slow-start batch succeeded
    exp.creation_observed(KEY, count=6)  # second batch failed, the rest never attempted
    assert exp.satisfied(KEY, T0)


def test_deletes_are_tracked_by_pod_name_once() -> None:
    exp = Expectations()
    exp.expect(KEY, creates=0, deletes=["a", "b"], now=T0)
    exp.deletion_observed(KEY, "a")
    exp.deletion_observed(KEY, "a")  # terminating update then delete event: counted once
    assert not exp.satisfied(KEY, T0)
    exp.deletion_observed(KEY, "unrelated")
    assert not exp.satisfied(KEY, T0)
    exp.deletion_observed(KEY, "b")
    assert exp.satisfied(KEY, T0)


def test_record_expires_after_ttl() -> None:
    exp = Expectations()
    exp.expect(KEY, creates=1, deletes=["a"], now=T0)
    assert exp.pending_for(KEY, T0 + timedelta(seconds=1)) == EXPECTATIONS_TTL.total_seconds() - 1
    assert not exp.satisfied(KEY, T0 + EXPECTATIONS_TTL)
    assert exp.satisfied(KEY, T0 + EXPECTATIONS_TTL + timedelta(seconds=1))


def test_keys_are_independent_and_forget_resets() -> None:
    exp = Expectations(ttl=timedelta(seconds=10))
    exp.expect(KEY, creates=1, deletes=(), now=T0)
    assert exp.satisfied("ns/other", T0)
    exp.forget(KEY)
    assert exp.satisfied(KEY, T0)


def test_new_record_replaces_old() -> None:
    exp = Expectations()
    exp.expect(KEY, creates=3, deletes=(), now=T0)
    exp.expect(KEY, creates=0, deletes=(), now=T0)
    assert exp.satisfied(KEY, T0)


def test_observations_without_record_are_ignored() -> None:
    exp = Expectations()
    exp.creation_observed(KEY)
    exp.deletion_observed(KEY, "a")
    assert exp.satisfied(KEY, T0)
