"""The operators compared with their Go references (bench/reference): how to start each one,
how to tell its requests apart in the audit log, and the ratios of two sets of figures."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bench.operator import OperatorProcess
from bench.plane import KUBECONFIG, LOCAL
from bench.runtime import runtime_bin

REFERENCE_BIN = LOCAL / "bench-reference" / "bin"
"""Where ``make bench-reference`` (bench/reference/build.sh) puts the Go binaries."""
LOG_DIR = LOCAL / "bench"
OPSUITE, GO = "opsuite", "go"
PAIRS = ("podset", "configmapsync", "poddebugger")


@dataclass(frozen=True)
class Implementation:
    """One side of a pair: an opsuite console script or a Go reference binary."""

    pair: str
    """podset, configmapsync or poddebugger."""
    side: str
    """``OPSUITE`` or ``GO``."""
    command: str
    user_agent: str
    """Prefix of its requests' User-Agent ("podset-operator/", "podset/")."""
    args: tuple[str, ...] = ()

    def sent(self, user_agent: str) -> bool:
        """Whether a request with ``user_agent`` is this benchmark's process's: opsuite's run
        with identity "bench" (``<name>/<version> (bench)``); another engineer's operator of
        the same name on the shared plane is not."""
        mine = user_agent.startswith(self.user_agent)
        return mine and (self.side == GO or user_agent.endswith("(bench)"))

    @property
    def label(self) -> str:
        """e.g. "podset-operator" or "podset (Go)"."""
        return self.command if self.side == OPSUITE else f"{self.command} (Go)"

    def executable(self) -> Path:
        """The Go binary, or the opsuite console script of the runtime virtualenv (made if
        needed: bench/runtime.py)."""
        if self.side == OPSUITE:
            return runtime_bin() / self.command
        path = REFERENCE_BIN / self.command
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `make bench-reference` first")
        return path

    def process(
        self, namespace: str | None, log_name: str, kubeconfig: Path = KUBECONFIG
    ) -> OperatorProcess:
        """A process serving ``namespace`` (None: all namespaces), not started yet."""
        args = [*self.args, *([f"--namespace={namespace}"] if namespace else [])]
        return OperatorProcess(
            self.command,
            args,
            LOG_DIR / f"{log_name}-{self.side}-{self.command}.log",
            kubeconfig=kubeconfig,
            executable=self.executable(),
        )


IMPLEMENTATIONS: dict[str, tuple[Implementation, Implementation]] = {
    "podset": (
        Implementation("podset", OPSUITE, "podset-operator", "podset-operator/"),
        Implementation("podset", GO, "podset", "podset/"),
    ),
    "configmapsync": (
        Implementation(
            "configmapsync", OPSUITE, "configmapsync-operator", "configmapsync-operator/"
        ),
        Implementation("configmapsync", GO, "configmapsync", "configmapsync/"),
    ),
    "poddebugger": (
        # The bench installs no admission policies (the Go reference has no such gate).
        Implementation(
            "poddebugger",
            OPSUITE,
            "pod-debugger-operator",
            "pod-debugger-operator/",
            ("--allow-without-admission-policy",),
        ),
        Implementation("poddebugger", GO, "poddebugger", "poddebugger/"),
    ),
}


def order(pair: str, turn: int) -> tuple[Implementation, Implementation]:
    """Both sides of ``pair``, opsuite first on even turns, Go first on odd ones."""
    first, second = IMPLEMENTATIONS[pair]
    return (first, second) if turn % 2 == 0 else (second, first)


def median(values: Iterable[float | None]) -> float:
    """Median of the known values; nan when there is none."""
    known = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def ratio(opsuite: float, go: float) -> float | None:
    """opsuite / Go; None when Go's figure is zero or unknown."""
    if math.isnan(opsuite) or math.isnan(go) or go == 0:
        return None
    return opsuite / go


def verdict(value: float | None, limit: float | None) -> bool | None:
    """Met (ratio <= limit), missed, or None when there is no target or no ratio."""
    if limit is None or value is None:
        return None
    return value <= limit
