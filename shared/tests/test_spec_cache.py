"""Specs are parsed once per (uid, generation)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opsuite_common.spec_cache import SpecCache


def test_a_spec_is_parsed_once_per_generation_and_an_invalid_one_is_none() -> None:
    calls: list[int] = []

    def parse(obj: Mapping[str, Any]) -> int:
        calls.append(1)
        replicas = obj["spec"]["replicas"]
        if replicas < 0:
            raise ValueError("replicas: must not be negative")
        return int(replicas)

    cache = SpecCache(parse, ValueError)
    obj: dict[str, Any] = {"metadata": {"uid": "u-1", "generation": 1}, "spec": {"replicas": 2}}
    assert [cache.get(obj) for _ in range(5)] == [2] * 5
    assert len(calls) == 1
    changed = {"metadata": {"uid": "u-1", "generation": 2}, "spec": {"replicas": -1}}
    assert cache.get(changed) is None
    assert cache.get(changed) is None
    assert len(calls) == 2
    cache.forget("u-1")
    assert len(cache) == 0
