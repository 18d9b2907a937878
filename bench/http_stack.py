"""The operators' write path against the two designs it replaced, side by side (#21, item 3;
#19; docs/http-stack.md).

    python -m bench.http_stack [--writes 500] [--rounds 3] [--concurrency 64]

Four ways to send the same writes from one asyncio operator process:

- ``threads``: the first design, kept here only as a baseline: the blocking ``kubernetes``
  client (urllib3) in a pool of ``--concurrency`` threads (:class:`ThreadPoolWriter`);
- ``aiohttp``: the second, kept here only as a baseline: one ``aiohttp`` session on the event
  loop, as ``KubeApi`` had until #19 (:class:`AiohttpWriter`);
- ``kubeapi``: what the operators do, :class:`opsuite_common.kube.KubeApi` on its own HTTP/1.1
  connections (:mod:`opsuite_common.http1`), at most ``--concurrency`` requests in flight,
  each write passing an open write fence;
- ``httpx-h2``: the candidate of #36 (item 2), one ``httpx.AsyncClient`` speaking HTTP/2
  (httpx with h2, a dev dependency only) that multiplexes the requests in flight over one
  connection, as client-go does (:class:`HttpxH2Writer`).

The workload is a PodSet-like burst: ``--writes`` pod creates at once, then as many deletes, in a
fresh namespace of the local plane (kwok nodes take the pods; nothing runs). Each stack runs in
a fresh process per round, alternating which goes first. Per stack, medians over the rounds:
CPU seconds per 1,000 writes (the process's user + system time during the writes), RSS after the
writes and its peak (MiB), write latency p50 / p99 / max (ms, from the request being made to
its response, queueing included), the wall time of the whole burst (s), and the TCP connections
to the API server the process opened (distinct local ports of its sockets, sampled every
SAMPLE_EVERY seconds from /proc by this parent process, so that the sampling's CPU is not the
worker's). Printed, and written to .local/measurements/bench-http-stack.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import httpx
import orjson
from kubernetes import client, config

from bench import plane
from opsuite_common.fence import WriteFence
from opsuite_common.kube import KubeApi, resource_path
from opsuite_common.kube_transport import (
    IDLE_CONNECTION_TIMEOUT,
    UNACKNOWLEDGED_TIMEOUT,
    api_socket,
    bound_tls_read_buffers,
    ssl_context,
)
from opsuite_common.kubeconfig import Configuration, load_configuration
from opsuite_common.store import JSON

STACKS = ("threads", "aiohttp", "httpx-h2", "kubeapi")
FIGURES = (
    "cpu_s_per_1000",
    "rss_mib",
    "peak_rss_mib",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "burst_s",
    "connections",
)
SAMPLE_EVERY = 0.02
"""Seconds between two looks at the worker's sockets."""
OUTPUT = plane.LOCAL / "measurements" / "bench-http-stack.json"
USER_AGENT = "opsuite-bench-http-stack"


def _pod(name: str) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "http-stack"}},
        "spec": {
            "containers": [{"name": "main", "image": "busybox:1.37"}],
            "terminationGracePeriodSeconds": 0,
        },
    }


class ThreadPoolWriter:
    """The former ``KubeApi`` write path, the baseline: each request built as it built them
    (auth headers only, no model serialisation) and sent by the blocking client in a thread."""

    def __init__(self, kubeconfig: Path, concurrency: int) -> None:
        configuration = client.Configuration()
        config.load_kube_config(str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.connection_pool_maxsize = concurrency
        self.api = client.ApiClient(configuration)
        self.api.user_agent = USER_AGENT
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="kube-api")

    def _send(self, method: str, path: str, body: object) -> JSON:
        headers = {
            **self.api.default_headers,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        self.api.update_params_for_auth(headers, None, ["BearerToken"], path, method, body)
        url = self.api.configuration.host + path
        response = self.api.call_api(
            method, url, header_params=headers, body=body, _request_timeout=30
        )
        response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            raise RuntimeError(f"{method} {path}: {response.status}")
        data: JSON = json.loads(response.data) if response.data else {}
        return data

    async def request(self, method: str, path: str, body: object) -> JSON:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self._send, method, path, body)

    async def close(self) -> None:
        self.pool.shutdown()


class AiohttpWriter:
    """``KubeApi``'s write path until #19, the second baseline: one aiohttp session (no bound on
    connections, 90 s keep-alive, TCP_USER_TIMEOUT sockets), JSON bodies by ``json.dumps``, the
    token read from the configuration for every request, at most ``concurrency`` in flight."""

    def __init__(self, kubeconfig: Path, concurrency: int) -> None:
        self.configuration = client.Configuration()
        config.load_kube_config(str(kubeconfig), client_configuration=self.configuration)  # type: ignore[no-untyped-call]
        self.slots = asyncio.Semaphore(concurrency)
        self.session: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            conf = self.configuration
            context = ssl.create_default_context(cafile=conf.ssl_ca_cert)
            if conf.cert_file:
                context.load_cert_chain(conf.cert_file, conf.key_file)
            connector = aiohttp.TCPConnector(
                limit=0, keepalive_timeout=90.0, ssl=context, socket_factory=api_socket
            )
            headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
            self.session = aiohttp.ClientSession(connector=connector, headers=headers)
        return self.session

    async def request(self, method: str, path: str, body: object) -> JSON:
        conf = self.configuration
        headers = {"Content-Type": "application/json"}
        token = conf.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token
        async with (
            self.slots,
            self._session().request(
                method,
                conf.host + path,
                data=json.dumps(body),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as response,
        ):
            raw = await response.read()
        if not 200 <= response.status <= 299:
            raise RuntimeError(f"{method} {path}: {response.status}")
        data: JSON = json.loads(raw) if raw else {}
        return data

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


class HttpxH2Writer:
    """The HTTP/2 candidate (#36, item 2): one ``httpx.AsyncClient`` with ``http2=True`` on the
    event loop, the TLS context, sockets (no Nagle, TCP_USER_TIMEOUT) and idle timeout of
    ``KubeApi``'s connections, the ``Authorization`` header asked of the configuration for
    every request, orjson bodies, at most ``concurrency`` in flight, multiplexed as streams of
    one connection (httpx opens one HTTP/2 connection per server, and the API server allows
    far more than 64 streams on it)."""

    def __init__(self, configuration: Configuration, concurrency: int) -> None:
        self.configuration = configuration
        self.slots = asyncio.Semaphore(concurrency)
        transport = httpx.AsyncHTTPTransport(
            verify=ssl_context(configuration),
            http2=True,
            limits=httpx.Limits(keepalive_expiry=IDLE_CONNECTION_TIMEOUT),
            socket_options=[
                (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
                (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(UNACKNOWLEDGED_TIMEOUT * 1000)),
            ],
        )
        self.client = httpx.AsyncClient(
            transport=transport,
            base_url=configuration.host,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            timeout=30.0,
        )

    async def request(self, method: str, path: str, body: object) -> JSON:
        headers = {"Content-Type": "application/json"}
        authorization = await self.configuration.authorization()
        if authorization:
            headers["Authorization"] = authorization
        async with self.slots:
            response = await self.client.request(
                method, path, content=orjson.dumps(body), headers=headers
            )
        if not 200 <= response.status_code <= 299:
            raise RuntimeError(f"{method} {path}: {response.status_code}")
        data: JSON = orjson.loads(response.content) if response.content else {}
        return data

    async def close(self) -> None:
        await self.client.aclose()


async def _burst(
    send: Callable[[str, str, object], Awaitable[JSON]], namespace: str, writes: int
) -> list[float]:
    """``writes`` creates at once, then as many deletes; each write's latency in seconds."""
    latencies: list[float] = []

    async def timed(method: str, path: str, body: object) -> None:
        began = time.perf_counter()
        await send(method, path, body)
        latencies.append(time.perf_counter() - began)

    names = [f"p{i}" for i in range(writes)]
    pods = resource_path("v1", "pods", namespace)
    await asyncio.gather(*(timed("POST", pods, _pod(n)) for n in names))
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    await asyncio.gather(
        *(timed("DELETE", resource_path("v1", "pods", namespace, n), options) for n in names)
    )
    return latencies


def _status_mib(field: str) -> float:
    """A memory figure of /proc/self/status: VmRSS now, or VmHWM, the peak since the worker's
    exec (getrusage's ru_maxrss keeps the forking parent's, larger, across the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


async def _worker(stack: str, kubeconfig: Path, namespace: str, writes: int, width: int) -> JSON:
    bound_tls_read_buffers()  # as an operator's start does
    if stack == "threads":
        writer = ThreadPoolWriter(kubeconfig, width)
        send, close = writer.request, writer.close
    elif stack == "aiohttp":
        session = AiohttpWriter(kubeconfig, width)
        send, close = session.request, session.close
    elif stack == "httpx-h2":
        multiplexed = HttpxH2Writer(load_configuration(), width)
        send, close = multiplexed.request, multiplexed.close
    else:
        fence = WriteFence()
        fence.open()
        api = KubeApi(load_configuration(), user_agent=USER_AGENT, fence=fence, max_parallel=width)

        async def send(method: str, path: str, body: object) -> JSON:
            return await api.request(method, path, body=body)

        close = api.close
    before = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    latencies = await _burst(send, namespace, writes)
    burst = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_SELF)
    rss, peak = _status_mib("VmRSS"), _status_mib("VmHWM")
    await close()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    latencies.sort()
    return {
        "stack": stack,
        "writes": len(latencies),
        "cpu_s_per_1000": cpu * 1000 / len(latencies),
        "rss_mib": rss,
        "peak_rss_mib": peak,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "max_ms": 1000 * latencies[-1],
        "burst_s": burst,
    }


def socket_ports(tcp_table: str, inodes: set[str], remote_port: int) -> set[int]:
    """The local ports of the sockets among ``inodes`` connected to ``remote_port``, from a
    /proc/<pid>/net/tcp or tcp6 table."""
    ports: set[int] = set()
    for line in tcp_table.splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == remote_port:
            ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


def connected_ports(pid: int, remote_port: int) -> set[int]:
    """The local ports of process ``pid``'s TCP connections to ``remote_port`` now (empty once
    it has ended)."""
    try:
        inodes: set[str] = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except FileNotFoundError:
                continue  # closed since the listing (the listing's own, for one)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
        tables = [Path(f"/proc/{pid}/net/{t}").read_text() for t in ("tcp", "tcp6")]
    except (FileNotFoundError, ProcessLookupError):
        return set()
    return set().union(*(socket_ports(table, inodes, remote_port) for table in tables))


def medians(trials: list[JSON], stacks: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Each stack's median of each figure over its trials."""
    return {
        stack: {f: statistics.median(t[f] for t in trials if t["stack"] == stack) for f in FIGURES}
        for stack in stacks
    }


def _run_worker(stack: str, namespace: str, args: argparse.Namespace) -> JSON:
    command = [
        sys.executable, "-m", "bench.http_stack", "--worker", stack, "--namespace", namespace,
        "--writes", str(args.writes), "--concurrency", str(args.concurrency),
        "--kubeconfig", str(args.kubeconfig),
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(args.kubeconfig)}  # what load_configuration reads
    api_port = urlsplit(plane.api_client(args.kubeconfig).configuration.host).port or 443
    ports: set[int] = set()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as worker:
        deadline = time.monotonic() + 600
        while worker.poll() is None:
            if time.monotonic() > deadline:
                worker.kill()
            ports |= connected_ports(worker.pid, api_port)
            time.sleep(SAMPLE_EVERY)
        out, err = worker.communicate()
    if worker.returncode != 0:
        raise RuntimeError(f"{stack} worker exited {worker.returncode}: {err[-2000:]}")
    result: JSON = json.loads(out)
    return result | {"connections": len(ports)}


def main(argv: list[str] | None = None) -> int:
    """Run the rounds (or, with --worker, one stack's burst) and report."""
    parser = argparse.ArgumentParser(prog="python -m bench.http_stack", description=__doc__)
    parser.add_argument("--writes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--kubeconfig", type=Path, default=plane.KUBECONFIG)
    parser.add_argument("--worker", choices=STACKS, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = asyncio.run(
            _worker(args.worker, args.kubeconfig, args.namespace, args.writes, args.concurrency)
        )
        print(json.dumps(result))
        return 0
    core = client.CoreV1Api(plane.api_client(args.kubeconfig))
    trials: list[JSON] = []
    for round_ in range(args.rounds):
        order = STACKS if round_ % 2 == 0 else tuple(reversed(STACKS))
        for stack in order:
            namespace = f"bench-http-{uuid.uuid4().hex[:6]}"
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            try:
                wait_for_sa = time.monotonic() + 30
                while not core.list_namespaced_service_account(namespace).items:
                    if time.monotonic() > wait_for_sa:
                        raise RuntimeError(f"no ServiceAccount in {namespace}")
                    time.sleep(0.2)
                trials.append({"round": round_, **_run_worker(stack, namespace, args)})
            finally:
                core.delete_namespace(namespace, propagation_policy="Background")
    median = medians(trials, STACKS)
    print(
        f"{'figure (median of ' + str(args.rounds) + ')':<26}"
        + "".join(f"{s:>12}" for s in STACKS)
        + "".join(f"{'kubeapi/' + s:>18}" for s in STACKS[:-1])
    )
    for f in FIGURES:
        values = [median[s][f] for s in STACKS]
        ratios = "".join(f"{values[-1] / v:>18.2f}" if v else f"{'-':>18}" for v in values[:-1])
        print(f"{f:<26}" + "".join(f"{v:>12.2f}" for v in values) + ratios)
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(
        json.dumps({"config": vars(args) | {"kubeconfig": str(args.kubeconfig)}, "trials": trials,
                    "medians": median, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                   indent=2)
    )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
