"""How a request logs in to the API server: the ``Authorization`` header each kind of credential
gives, asked for before every request.

A bearer token inline; a token file, read again a minute after it was last read, as the
kubelet rotates a service account's token (client-go does the same); basic credentials; or a
client-go exec credential plugin (``client.authentication.k8s.io`` ExecCredential). An exec
plugin runs at start, then again ahead of its token's expiry, in a thread: a cloud provider's
can take seconds, which on the event loop would stall everything, the Lease's renewal included
(#32, item 2). :mod:`opsuite_common.kubeconfig` reads which one a configuration names.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import logging
import math
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "EXEC_TIMEOUT",
    "BasicAuth",
    "ConfigError",
    "Credentials",
    "ExecPlugin",
    "StaticToken",
    "TokenFile",
]

TOKEN_REREAD_AFTER = 60.0
"""Seconds after which a token file is read again (client-go's cachingTokenSource: 1 min)."""
EXEC_TIMEOUT = 60.0
"""Seconds an exec credential plugin may run. It runs again that long before its token expires
(or half the token's lifetime before, if shorter), so that the run ends, or gives up, while
the token is still valid."""

log = logging.getLogger(__name__)


class ConfigError(Exception):
    """No usable configuration: not in a cluster and no (usable) kubeconfig, or credentials it
    names that cannot be had (an exec plugin that fails)."""


class Credentials(Protocol):
    """What a request's ``Authorization`` header carries, asked for before every request."""

    async def authorization(self) -> str | None:
        """The header's value (``Bearer <token>``, ``Basic <…>``), or None."""
        ...


@dataclass
class StaticToken:
    """A bearer token given inline."""

    token: str

    async def authorization(self) -> str | None:
        """``Bearer <token>``."""
        return f"Bearer {self.token}"


@dataclass
class TokenFile:
    """A bearer token read from a file, and read again once ``reread_after`` has passed."""

    path: Path
    reread_after: float = TOKEN_REREAD_AFTER
    clock: Callable[[], float] = time.monotonic
    _token: str = ""
    _read_at: float | None = None

    async def authorization(self) -> str | None:
        """``Bearer <token>`` from the file as last read (again if due)."""
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.reread_after:
            try:
                self._token = self.path.read_text().strip()
            except OSError:
                if self._read_at is None:
                    raise
            self._read_at = now
        return f"Bearer {self._token}" if self._token else None


@dataclass
class BasicAuth:
    """A username and password (basic authentication)."""

    username: str
    password: str

    async def authorization(self) -> str | None:
        """``Basic <base64 of username:password>``."""
        pair = f"{self.username}:{self.password}".encode()
        return f"Basic {base64.b64encode(pair).decode()}"


@dataclass(frozen=True)
class _ExecCredential:
    """What one run of an exec plugin gave, and when (``ExecPlugin.clock`` time) it is due to
    run again and when its token expires (``math.inf``: never)."""

    status: Mapping[str, Any]
    refresh_at: float
    expires: float


@dataclass
class ExecPlugin:
    """A client-go exec credential plugin: runs ``command`` for an ExecCredential, and again
    ahead of its token's expiry. Runs after the first take place in a thread of their own, off
    the event loop; every caller, on any event loop, shares the one under way."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    cluster: Mapping[str, Any] | None = None
    """The cluster, when the plugin asks for it (``provideClusterInfo``)."""
    clock: Callable[[], float] = time.time
    _credential: _ExecCredential | None = field(default=None, init=False, repr=False)
    _run: concurrent.futures.Future[_ExecCredential] | None = field(
        default=None, init=False, repr=False
    )
    """The last run started in a thread."""
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def status(self) -> Mapping[str, Any]:
        """The last ExecCredential's status (empty before the first run)."""
        return self._credential.status if self._credential is not None else {}

    def run_now(self) -> None:
        """Run the plugin now, blocking: at start, so that a broken plugin fails the start and
        not a request."""
        self._credential = self._execute()

    async def authorization(self) -> str | None:
        """``Bearer <token>``. Once the token is due, the plugin runs again while it is still
        used; once it has expired, callers wait for that run."""
        credential = self._credential
        now = self.clock()
        if credential is None or now >= credential.expires:
            credential = await asyncio.wrap_future(self._running(after_failure=True))
        elif now >= credential.refresh_at:
            self._running(after_failure=False)
        token = credential.status.get("token")
        return f"Bearer {token}" if token else None

    def _running(self, *, after_failure: bool) -> concurrent.futures.Future[_ExecCredential]:
        """The run under way, else a new one; after a failed run, a new one only if
        ``after_failure`` (the token has expired): a plugin that fails ahead of the expiry is
        not run again on every request until then."""
        with self._lock:
            last = self._run
            if last is not None and not (
                last.done() and (after_failure or last.exception() is None)
            ):
                return last
            run: concurrent.futures.Future[_ExecCredential] = concurrent.futures.Future()
            run.set_running_or_notify_cancel()  # a caller that stops waiting cannot cancel it
            self._run = run
        threading.Thread(target=self._run_in_thread, args=(run,), daemon=True).start()
        return run

    def _run_in_thread(self, run: concurrent.futures.Future[_ExecCredential]) -> None:
        try:
            credential = self._execute()
        except Exception as exc:  # handed to the callers waiting for it
            run.set_exception(exc)
            log.warning("exec credential plugin %r failed: %s", self.command, exc)
        else:
            self._credential = credential
            run.set_result(credential)

    def _execute(self) -> _ExecCredential:
        """Run the plugin (blocking) and read its ExecCredential."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            done = subprocess.run(
                [self.command, *self.args],
                env=env,
                capture_output=True,
                text=True,
                timeout=EXEC_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"exec credential plugin {self.command!r}: {exc}") from exc
        if done.returncode != 0:
            raise ConfigError(
                f"exec credential plugin {self.command!r} exited {done.returncode}: "
                f"{done.stderr.strip()[:500]}"
            )
        try:
            status = json.loads(done.stdout)["status"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"exec credential plugin {self.command!r}: no status") from exc
        expiry = status.get("expirationTimestamp")
        expires = (
            datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp()
            if expiry
            else math.inf
        )
        refresh_at = expires - min(EXEC_TIMEOUT, (expires - self.clock()) / 2)
        return _ExecCredential(status, refresh_at, expires)
