"""opsuite_common.kubeconfig and opsuite_common.credentials: the service account in a cluster,
else KUBECONFIG's files merged as client-go merges them, with every credential kind the
operators accept (real files and a real exec plugin; no mocked loader)."""

from __future__ import annotations

import asyncio
import base64
import json
import stat
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from opsuite_common.credentials import (
    EXEC_TIMEOUT,
    BasicAuth,
    ConfigError,
    ExecPlugin,
    StaticToken,
    TokenFile,
)
from opsuite_common.kubeconfig import Configuration, load_configuration


def kubeconfig(
    path: Path,
    *,
    current: str | None = "ctx",
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, tuple[str, str]] | None = None,
) -> Path:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in (clusters or {}).items()],
        "users": [{"name": n, "user": u} for n, u in (users or {}).items()],
        "contexts": [
            {"name": n, "context": {"cluster": c, "user": u}}
            for n, (c, u) in (contexts or {}).items()
        ],
    }
    if current is not None:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


async def test_in_a_cluster_the_service_account_is_used(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "ca.crt").write_text("CA")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    conf = load_configuration(env, service_account=tmp_path)
    assert conf.host == "https://[fd00::1]:443"
    assert conf.ca_file == str(tmp_path / "ca.crt")
    assert isinstance(conf.credentials, TokenFile)
    assert await conf.authorization() == "Bearer sa-token"
    assert await conf.bearer_token() == "sa-token"


def test_without_a_service_account_token_the_kubeconfig_is_used(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://api:6443/"}},
        users={"u": {"token": "t"}},
        contexts={"ctx": ("c", "u")},
    )
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    conf = load_configuration({**env, "KUBECONFIG": str(path)}, service_account=tmp_path / "no")
    assert conf.host == "https://api:6443"
    assert conf.credentials == StaticToken("t")


def test_kubeconfig_files_merge_the_first_setting_a_name_or_the_context_wins(
    tmp_path: Path,
) -> None:
    first = kubeconfig(
        tmp_path / "a" / "config",
        current=None,
        clusters={"c": {"server": "https://first", "certificate-authority": "ca.pem"}},
        users={"u": {"client-certificate": "me.crt", "client-key": "/abs/me.key"}},
    )
    second = kubeconfig(
        tmp_path / "b" / "config",
        current="ctx",
        clusters={"c": {"server": "https://second"}, "d": {"server": "https://d"}},
        users={"u": {"token": "ignored"}},
        contexts={"ctx": ("c", "u")},
    )
    missing = tmp_path / "missing"
    kubeconfigs = ":".join(map(str, (missing, first, second)))
    conf = load_configuration({"KUBECONFIG": kubeconfigs})
    assert conf.host == "https://first"
    assert conf.ca_file == str(tmp_path / "a" / "ca.pem")  # relative to its own file
    assert (conf.cert_file, conf.key_file) == (str(tmp_path / "a" / "me.crt"), "/abs/me.key")
    assert conf.credentials is None


def test_inline_data_goes_to_private_files_and_the_cluster_options_are_kept(
    tmp_path: Path,
) -> None:
    encoded = {k: base64.b64encode(k.encode()).decode() for k in ("ca", "cert", "key")}
    path = kubeconfig(
        tmp_path / "config",
        clusters={
            "c": {
                "server": "https://api",
                "certificate-authority-data": encoded["ca"],
                "insecure-skip-tls-verify": True,
                "tls-server-name": "kubernetes.default",
                "proxy-url": "http://proxy:3128",
            }
        },
        users={
            "u": {"client-certificate-data": encoded["cert"], "client-key-data": encoded["key"]}
        },
        contexts={"ctx": ("c", "u")},
    )
    conf = load_configuration({"KUBECONFIG": str(path)})
    files = [conf.ca_file, conf.cert_file, conf.key_file]
    assert [Path(f).read_bytes() for f in files if f] == [b"ca", b"cert", b"key"]
    assert all(stat.S_IMODE(Path(f).stat().st_mode) == 0o600 for f in files if f)
    assert (conf.verify, conf.tls_server_name, conf.proxy) == (
        False,
        "kubernetes.default",
        "http://proxy:3128",
    )


async def test_token_file_and_basic_credentials(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file")
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "http://api"}},
        users={"f": {"tokenFile": "tok"}, "b": {"username": "admin", "password": "pw"}},
        contexts={"ctx": ("c", "f"), "basic": ("c", "b")},
    )
    conf = load_configuration({"KUBECONFIG": str(path)})
    assert await conf.authorization() == "Bearer from-file"
    document = yaml.safe_load(path.read_text())
    document["current-context"] = "basic"
    path.write_text(yaml.safe_dump(document))
    basic = load_configuration({"KUBECONFIG": str(path)})
    assert basic.credentials == BasicAuth("admin", "pw")
    assert await basic.authorization() == "Basic " + base64.b64encode(b"admin:pw").decode()
    assert await basic.bearer_token() is None


async def test_a_token_file_is_read_again_a_minute_after(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("one")
    now = [0.0]
    source = TokenFile(tmp_path / "token", clock=lambda: now[0])
    assert await source.authorization() == "Bearer one"
    (tmp_path / "token").write_text("two")
    now[0] = 59.9
    assert await source.authorization() == "Bearer one"
    now[0] = 60.0
    assert await source.authorization() == "Bearer two"
    (tmp_path / "token").unlink()  # gone for a moment: the last token is kept
    now[0] = 125.0
    assert await source.authorization() == "Bearer two"


def _plugin(tmp_path: Path, status: dict[str, Any]) -> Path:
    """A real exec plugin: records its environment, prints an ExecCredential with ``status``."""
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys\n"
        f"log = {str(tmp_path / 'calls')!r}\n"
        "with open(log, 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv[1:], 'who': os.environ.get('WHO'),"
        " 'info': json.loads(os.environ['KUBERNETES_EXEC_INFO'])}) + '\\n')\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',"
        f" 'kind': 'ExecCredential', 'status': {status!r}}}))\n"
    )
    return script


def _calls(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_an_exec_plugin_gives_the_token_and_runs_again_once_it_expired(
    tmp_path: Path,
) -> None:
    script = _plugin(tmp_path, {"token": "exec-t", "expirationTimestamp": "2030-01-01T00:00:00Z"})
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://api", "certificate-authority": "ca.pem"}},
        users={
            "u": {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "command": sys.executable,
                    "args": [str(script), "--region", "x"],
                    "env": [{"name": "WHO", "value": "me"}],
                    "provideClusterInfo": True,
                    "interactiveMode": "Never",
                }
            }
        },
        contexts={"ctx": ("c", "u")},
    )
    conf = load_configuration({"KUBECONFIG": str(path)})
    assert await conf.authorization() == "Bearer exec-t"
    [call] = _calls(tmp_path)  # run once, at load; the token is still valid
    assert call["argv"] == ["--region", "x"]
    assert call["who"] == "me"
    assert call["info"]["spec"]["cluster"]["server"] == "https://api"
    assert call["info"]["spec"]["interactive"] is False
    plugin = conf.credentials
    assert isinstance(plugin, ExecPlugin)
    plugin.clock = lambda: 1_900_000_000.0  # 2030-03-17: expired
    assert await conf.authorization() == "Bearer exec-t"
    assert len(_calls(tmp_path)) == 2


def test_an_exec_plugin_client_certificate_is_used(tmp_path: Path) -> None:
    script = _plugin(tmp_path, {"clientCertificateData": "CERT", "clientKeyData": "KEY"})
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://api"}},
        users={"u": {"exec": {"command": sys.executable, "args": [str(script)]}}},
        contexts={"ctx": ("c", "u")},
    )
    conf = load_configuration({"KUBECONFIG": str(path)})
    assert conf.cert_file is not None
    assert conf.key_file is not None
    assert (Path(conf.cert_file).read_text(), Path(conf.key_file).read_text()) == ("CERT", "KEY")
    assert asyncio.run(conf.authorization()) is None


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"exec": {"command": "/nonexistent/plugin"}}, "exec credential plugin"),
        ({"exec": {"command": "false"}}, "exited 1"),
        ({"auth-provider": {"name": "oidc"}}, "'oidc' auth-provider is not supported"),
    ],
)
def test_unusable_credentials_fail_the_start_with_a_clear_error(
    tmp_path: Path, user: dict[str, Any], message: str
) -> None:
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://api"}},
        users={"u": user},
        contexts={"ctx": ("c", "u")},
    )
    with pytest.raises(ConfigError, match=message):
        load_configuration({"KUBECONFIG": str(path)})


def test_no_kubeconfig_or_no_current_context_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no kubeconfig at"):
        load_configuration({"HOME": str(tmp_path)})
    path = kubeconfig(tmp_path / "config", current="nope", clusters={"c": {"server": "x"}})
    with pytest.raises(ConfigError, match="current context 'nope' not found"):
        load_configuration({"KUBECONFIG": str(path)})


GATED_PLUGIN = """\
import json, pathlib, sys, time
here = pathlib.Path(sys.argv[1])
runs = here / "runs"
run = len(runs.read_text().splitlines()) if runs.exists() else 0
with runs.open("a") as log:
    log.write(f"{run}\\n")
if run:  # a refresh: it ends once the test lets it
    for _ in range(500):
        if (here / "go").exists():
            break
        time.sleep(0.01)
    if (here / "fail").exists():
        sys.exit("refused")
status = {"token": f"t{run}", "expirationTimestamp": f"2030-01-01T0{run}:00:00Z"}
print(json.dumps(
    {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
))
"""
T0_EXPIRES = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
"""When the token of the gated plugin's first run expires (run n's an hour later each)."""


def _gated(tmp_path: Path) -> tuple[Configuration, ExecPlugin]:
    """A configuration whose exec plugin ran once, at load; its later runs wait for the file
    ``go`` and fail if there is a file ``fail``."""
    script = tmp_path / "plugin.py"
    script.write_text(GATED_PLUGIN)
    path = kubeconfig(
        tmp_path / "config",
        clusters={"c": {"server": "https://api"}},
        users={"u": {"exec": {"command": sys.executable, "args": [str(script), str(tmp_path)]}}},
        contexts={"ctx": ("c", "u")},
    )
    conf = load_configuration({"KUBECONFIG": str(path)})
    assert isinstance(conf.credentials, ExecPlugin)
    return conf, conf.credentials


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()``, 5 s at most, polling it in a thread: the event loop runs on
    (a file or a log record gives no event to wait for)."""

    def poll() -> bool:
        deadline = time.monotonic() + 5
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    assert await asyncio.to_thread(poll)


async def _runs(tmp_path: Path, count: int) -> list[str]:
    """The plugin's runs, once it has started ``count``."""
    runs = tmp_path / "runs"
    await _until(lambda: len(runs.read_text().splitlines()) >= count)
    return runs.read_text().splitlines()


async def test_an_exec_plugin_runs_off_the_event_loop_and_its_callers_share_one_run(
    tmp_path: Path,
) -> None:
    """A cloud provider's plugin can take seconds; on the event loop it would stop everything,
    the Lease's renewal included (#32, item 2)."""
    conf, plugin = _gated(tmp_path)
    plugin.clock = lambda: T0_EXPIRES + 1  # expired
    callers = [asyncio.create_task(conf.authorization()) for _ in range(3)]
    assert await _runs(tmp_path, 2) == ["0", "1"]
    assert not any(caller.done() for caller in callers)
    (tmp_path / "go").touch()
    assert await asyncio.gather(*callers) == ["Bearer t1"] * 3
    assert await _runs(tmp_path, 2) == ["0", "1"]


async def test_an_exec_plugin_runs_again_ahead_of_its_tokens_expiry(tmp_path: Path) -> None:
    """Within EXEC_TIMEOUT of the expiry the plugin runs again in the background while the
    token, still valid, is used; once it has expired, callers wait for that run."""
    conf, plugin = _gated(tmp_path)
    plugin.clock = lambda: T0_EXPIRES - EXEC_TIMEOUT + 1
    assert await conf.authorization() == "Bearer t0"  # at once, while the plugin runs
    assert await _runs(tmp_path, 2) == ["0", "1"]
    plugin.clock = lambda: T0_EXPIRES
    waiting = asyncio.create_task(conf.authorization())
    (tmp_path / "go").touch()
    assert await waiting == "Bearer t1"
    assert await _runs(tmp_path, 2) == ["0", "1"]


async def test_a_failed_run_ahead_of_expiry_is_not_repeated_until_the_token_expires(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Else a broken plugin would run on every request until then."""
    conf, plugin = _gated(tmp_path)
    (tmp_path / "go").touch()
    (tmp_path / "fail").touch()
    plugin.clock = lambda: T0_EXPIRES - 1
    assert await conf.authorization() == "Bearer t0"
    await _until(lambda: "refused" in caplog.text)  # logged once the run has failed
    assert [await conf.authorization() for _ in range(3)] == ["Bearer t0"] * 3
    assert await _runs(tmp_path, 2) == ["0", "1"]
    plugin.clock = lambda: T0_EXPIRES
    with pytest.raises(ConfigError, match="exited 1: refused"):
        await conf.authorization()
    assert await _runs(tmp_path, 3) == ["0", "1", "2"]
