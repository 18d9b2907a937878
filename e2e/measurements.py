"""Figures the e2e scenarios measure, kept in ``.local/measurements/<name>.json``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from e2e.cluster import ROOT

MEASUREMENTS = ROOT / ".local" / "measurements"


def record(name: str, scenario: str, figures: dict[str, Any]) -> None:
    """Print ``figures`` and merge them, stamped ``measured_at``, into ``<name>.json`` under
    ``scenario``."""
    figures = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"), **figures}
    print(f"\n{scenario}: {json.dumps(figures)}")
    path = MEASUREMENTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[scenario] = figures
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
