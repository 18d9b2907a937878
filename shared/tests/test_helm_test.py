"""The charts' `helm test` script: what makes a release fail, and /readyz read over HTTP."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from opsuite_packaging.helm_test import problems, readyz


def _pod(name: str, phase: str = "Running", ip: str | None = "10.0.0.1") -> Any:
    status = {"phase": phase, **({"podIP": ip} if ip else {})}
    return {"metadata": {"name": name}, "status": status}


def _crd(established: str | None = "True") -> Any:
    conditions = [] if established is None else [{"type": "Established", "status": established}]
    return {"metadata": {"name": "xs.example.com"}, "status": {"conditions": conditions}}


def _ok(ip: str, port: int) -> str:
    return ""


def test_a_ready_operator_and_an_established_crd_pass() -> None:
    assert problems([_pod("a"), _pod("b")], _crd(), _ok, 8081) == []


def test_no_running_pod_fails() -> None:
    pods = [_pod("a", phase="Pending", ip=None), _pod("b", phase="Succeeded")]
    assert problems(pods, _crd(), _ok, 8081) == ["no running operator pod"]


def test_a_pod_not_ready_fails_with_its_name() -> None:
    def probe(ip: str, port: int) -> str:
        return "HTTP 500" if ip == "10.0.0.2" else ""

    found = problems([_pod("a"), _pod("b", ip="10.0.0.2")], _crd(), probe, 8081)
    assert found == ["pod b: /readyz: HTTP 500"]


@pytest.mark.parametrize("status", [None, "False", "Unknown"])
def test_a_crd_not_established_fails(status: str | None) -> None:
    assert problems([_pod("a")], _crd(status), _ok, 8081) == [
        "CRD xs.example.com is not Established"
    ]


@pytest.fixture
def server() -> Iterator[tuple[str, int, list[int]]]:
    """An HTTP server answering /readyz with the status at the head of the returned list."""
    statuses = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(statuses[0] if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", httpd.server_address[1], statuses
    httpd.shutdown()


def test_readyz_over_http(server: tuple[str, int, list[int]]) -> None:
    ip, port, statuses = server
    assert readyz(ip, port) == ""
    statuses[0] = 503
    assert readyz(ip, port) == "HTTP 503"


def test_readyz_reports_a_refused_connection() -> None:
    assert readyz("127.0.0.1", 1) != ""
