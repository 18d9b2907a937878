"""opsuite's kopf settings, through the kopf code they steer."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlparse

import kopf
import pytest
from kopf._cogs.clients import api, fetching
from kopf._cogs.structs import references

from opsuite_common.kopfwatch.settings import LIST_CHUNK_SIZE, configure_kopf
from opsuite_common.options import parse_options

PODS = references.Resource(group="", version="v1", plural="pods", namespaced=True)


async def test_initial_lists_come_in_pages_so_a_large_one_is_never_parsed_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Like client-go's reflector (pages of 500): the whole LIST of 20,000 pods parsed at
    once would set the process's memory high-water mark (and so its RSS, which Python does not
    give back) at about twice what the cache needs."""
    settings = kopf.OperatorSettings()
    configure_kopf(settings, parse_options("op", "", [], environ={}))
    queries: list[dict[str, list[str]]] = []
    pages = [
        {"metadata": {"resourceVersion": "7", "continue": "next"}, "items": [{"a": 1}] * 2},
        {"metadata": {"resourceVersion": "7", "continue": ""}, "items": [{"a": 2}]},
    ]

    async def get(url: str, **_: Any) -> dict[str, Any]:
        queries.append(parse_qs(urlparse(url).query))
        return pages[len(queries) - 1]

    monkeypatch.setattr(api, "get", get)
    chunks = [
        len(items)
        async for items, _ in fetching.fetch_objs(
            settings=settings,
            resource=PODS,
            namespace=references.NamespaceName("ns"),
            logger=logging.getLogger("t"),
        )
    ]
    assert chunks == [2, 1]
    assert [q.get("limit") for q in queries] == [[str(LIST_CHUNK_SIZE)]] * 2
    assert queries[1]["continue"] == ["next"]
    assert LIST_CHUNK_SIZE == 500
