"""Logs of a reconcile carry, as JSON fields, what controller-runtime's do: the controller, the
object's namespace and name, and an id of that one reconcile, on every line logged while it
runs, whichever module logs it."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator

import pytest

from opsuite_common.controller import Controller
from opsuite_common.logs import JsonFormatter, ReconcileFields, configure_logging, reconciling


@pytest.fixture
def lines() -> Iterator[io.StringIO]:
    """What the root logger writes, as configure_logging sets it up for JSON."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("json", "info")
    stream = io.StringIO()
    (handler,) = root.handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    yield stream
    root.handlers[:], root.level = saved


def _entries(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_line_logged_while_reconciling_carries_the_reconciles_fields(
    lines: io.StringIO,
) -> None:
    other = logging.getLogger("podset_operator.actions")
    other.info("outside")
    with reconciling("podset", ("ns", "web")):
        other.info("creating %d pods", 2)
    with reconciling("podset", ("ns", "web")):
        other.info("again")
    outside, first, again = _entries(lines)
    assert not {"controller", "namespace", "name", "reconcileID"} & set(outside)
    assert first["msg"] == "creating 2 pods"
    assert (first["controller"], first["namespace"], first["name"]) == ("podset", "ns", "web")
    assert first["reconcileID"] != again["reconcileID"]
    assert len(str(first["reconcileID"])) == 36  # a UUID, as controller-runtime's


async def test_the_controller_tags_what_a_reconcile_logs(lines: io.StringIO) -> None:
    failed = asyncio.Event()

    async def reconcile(key: tuple[str, str]) -> None:
        logging.getLogger("some_operator.reconcile").warning("looking at %s", key[1])
        await asyncio.sleep(0)
        failed.set()
        raise RuntimeError("boom")

    controller = Controller("pods", reconcile)
    synced = asyncio.Event()
    synced.set()
    controller.enqueue(("ns", "a"))
    (worker,) = controller.start(synced)
    await asyncio.wait_for(failed.wait(), 5)
    await asyncio.sleep(0.01)  # the failure is logged
    controller.queue.shut_down()
    worker.cancel()
    warning, failure, *_ = _entries(lines)
    assert warning["msg"] == "looking at a"
    assert str(failure["msg"]).startswith("reconcile ns/a failed")
    for entry in (warning, failure):
        assert (entry["controller"], entry["namespace"], entry["name"]) == ("pods", "ns", "a")
    assert warning["reconcileID"] == failure["reconcileID"]


def test_a_record_from_elsewhere_keeps_its_own_fields() -> None:
    record = logging.LogRecord("x", logging.INFO, "", 0, "m", None, None)
    record.controller = "mine"
    with reconciling("podset", ("ns", "web")):
        assert ReconcileFields().filter(record)
    assert json.loads(JsonFormatter().format(record))["controller"] == "mine"
