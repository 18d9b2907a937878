"""Every Event about an injected container names the PodDebugger and its requester."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from poddebugger_operator.attribution import MAX_USER, added, attribution, not_added
from poddebugger_operator.requester import REQUESTED_BY, REQUESTED_BY_GROUPS


def _debugger(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "shell", "namespace": "shop"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta}


def test_names_the_debugger_and_its_recorded_requester_but_not_the_groups() -> None:
    by = attribution(
        _debugger({REQUESTED_BY: "alice", REQUESTED_BY_GROUPS: "team-a\nsystem:authenticated"})
    )
    assert by == "PodDebugger shop/shell (requested by alice)"
    assert "team-a" not in by
    container = {"name": "pdbg-shell-0123", "image": "busybox:1.37"}
    assert added(by, container, "web-1") == (
        "PodDebugger shop/shell (requested by alice) added ephemeral container pdbg-shell-0123 "
        "(image busybox:1.37) to pod web-1"
    )
    assert not_added(by, "pdbg-shell-0123", "web-1", "forbidden") == (
        "PodDebugger shop/shell (requested by alice) could not add ephemeral container "
        "pdbg-shell-0123 to pod web-1: forbidden"
    )


def test_says_so_when_no_requester_is_recorded() -> None:
    assert attribution(_debugger()) == "PodDebugger shop/shell (requester not recorded)"
    assert attribution(_debugger({REQUESTED_BY: ""})).endswith("(requester not recorded)")


@given(st.text(min_size=1, max_size=2 * MAX_USER))
def test_a_hand_written_name_can_neither_break_the_line_nor_fill_the_message(user: str) -> None:
    by = attribution(_debugger({REQUESTED_BY: user}))
    assert by.isprintable()
    assert by.startswith("PodDebugger shop/shell (requested by ")
    assert len(by) <= len("PodDebugger shop/shell (requested by ...)") + MAX_USER
    if user.isprintable() and len(user) <= MAX_USER:
        assert f"(requested by {user})" in by
