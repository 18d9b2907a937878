"""kopf's private functions are replaced by one explicit call at process start
(``kopfwatch.install``, from ``run_operator``), never as a side effect of leading."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import kopf
import pytest

from opsuite_common import kopfwatch
from opsuite_testkit import offline_manager
from opsuite_testkit.local_server import PATCHED, kopf_unpatched


@pytest.fixture(autouse=True)
def _kopf_unpatched(monkeypatch: pytest.MonkeyPatch) -> None:
    """kopf's own functions, put back as they were after the test."""
    kopf_unpatched(monkeypatch)


def _replaced() -> list[str]:
    return [name for module, name in PATCHED if hasattr(getattr(module, name), "__wrapped__")]


async def test_leading_leaves_kopfs_functions_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def spawn_tasks(**_: Any) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(asyncio.sleep(0))]

    monkeypatch.setattr(kopf, "spawn_tasks", spawn_tasks)
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    await manager.lead()
    assert _replaced() == []


def test_install_replaces_each_function_once_and_routes_to_the_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = offline_manager("test-operator", ("ns",), tmp_path, monkeypatch)
    seen: list[Any] = []
    manager.watch("", "v1", "pods", on_event=lambda kind, obj, _old: seen.append((kind, obj)))
    kopfwatch.install(manager)
    first = {name: getattr(module, name) for module, name in PATCHED}
    kopfwatch.install(manager)  # again: kopf's own functions wrapped, never ours
    assert _replaced() == [name for _, name in PATCHED]
    for module, name in PATCHED:
        assert getattr(module, name).__wrapped__ is first[name].__wrapped__
    deliver = manager.route("", "pods")
    assert deliver is not None
    deliver({"type": "ADDED", "object": {"metadata": {"namespace": "ns", "name": "p"}}})
    assert seen == [("ADDED", {"metadata": {"namespace": "ns", "name": "p"}})]
