"""bench.runner: what every benchmark's main does around its run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import plane, runner


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plane that is up and answers v1.99 (no cluster needed)."""
    monkeypatch.setattr(plane, "ensure_up", lambda fake_nodes=None: None)
    monkeypatch.setattr(plane, "api_client", lambda: "api")
    monkeypatch.setattr(plane, "server_version", lambda api: "v1.99")


def environment(kubernetes: str, load_before: tuple[float, ...]) -> dict[str, Any]:
    return {"kubernetes": kubernetes, "load_average_before": load_before}


def test_measure_returns_the_result_and_the_environment(
    offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``duration_s`` is the time ``run`` took, to a tenth of a second."""
    now = [100.0]
    monkeypatch.setattr(runner, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def run(api: Any) -> str:
        now[0] += 12.34
        return f"ran on {api}"

    result, env = runner.measure(run, environment, "failed")
    assert result == "ran on api"
    assert env["kubernetes"] == "v1.99"
    assert env["duration_s"] == 12.3


def _raise(error: BaseException) -> Any:
    raise error


@pytest.mark.parametrize(("error", "code"), [(RuntimeError("boom"), 2), (KeyboardInterrupt(), 130)])
def test_measure_turns_an_error_or_an_interruption_into_an_exit_status(
    offline: None, error: BaseException, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(runner.Failed) as failed:
        runner.measure(lambda api: _raise(error), environment, "it failed (see the log)")
    assert failed.value.code == code
    assert ("it failed (see the log)" in capsys.readouterr().err) == (code == 2)


@pytest.mark.parametrize(
    ("met", "strict", "code"), [(True, True, 0), (False, False, 0), (False, True, 1)]
)
def test_write_document_writes_the_json_and_fails_a_missed_target_only_when_strict(
    tmp_path: Path, met: bool, strict: bool, code: int
) -> None:
    output = tmp_path / "out" / "bench.json"
    assert runner.write_document(output, {"targets_met": met}, strict=strict) == code
    assert json.loads(output.read_text()) == {"targets_met": met}
