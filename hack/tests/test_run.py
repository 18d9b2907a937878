"""hack/run.py (`make run`) against a cluster it was not started for: it asks first.

A stand-in kubectl on PATH answers as a live cluster would and records every call, so the test
sees what run.py would have changed. `make run` on the local plane itself is proven by .ci/run,
which runs it on its fresh clone until the samples are Ready.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KUBECTL = """\
#!/bin/sh
echo "$*" >> "{log}"
case "$*" in
  *"config current-context"*) echo production ;;
  *"config view"*) echo https://prod.example:6443 ;;
  *) ;;
esac
"""


def _run(
    tmp_path: Path, *args: str, kubeconfig: str | None = "cluster.yaml"
) -> tuple[int, str, list[str]]:
    log = tmp_path / "calls"
    log.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "kubectl").write_text(KUBECTL.format(log=log))
    (bin_dir / "kubectl").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(tmp_path / kubeconfig)
    done = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "run.py"), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr, log.read_text().splitlines()


def test_another_cluster_is_used_only_when_asked_for_and_agreed_to(tmp_path: Path) -> None:
    """--use-kubeconfig says which cluster, what it will change there and with whose
    credentials, then asks; without a terminal and without --yes it changes nothing."""
    code, out, calls = _run(tmp_path, "--use-kubeconfig")
    assert code != 0
    assert "context production, server https://prod.example:6443" in out
    assert "podsets.apps.opsuite.dev" in out
    assert "opsuite-demo.poddebugger-authorization.debug.opsuite.dev" in out
    assert "to\n    the namespace opsuite-demo only" in out
    assert "with YOUR credentials" in out
    assert "add --yes" in out
    assert calls, "the cluster was not even asked whether it answers"
    assert not [c for c in calls if c.split()[2:3] in (["apply"], ["create"], ["delete"])], calls


def test_use_kubeconfig_needs_kubeconfig(tmp_path: Path) -> None:
    code, out, calls = _run(tmp_path, "--use-kubeconfig", kubeconfig=None)
    assert code != 0
    assert "needs KUBECONFIG set" in out
    assert calls == []
