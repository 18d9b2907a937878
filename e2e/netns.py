"""Network faults between an operator process and the API server (#20).

An operator runs inside a network namespace of its own (``ip netns exec``) and reaches the API
server through a veth pair and a relay: its kubeconfig names ``https://<API_IP>:<port>``, a
route in the namespace sends that address over the veth, and the relay (a thread of the test
process, listening on that address of the machine) forwards each connection to the API server's
real address. Nothing outside the namespace changes: the namespace, its veth pair (addresses in
10.250.0.0/16) and the ``tc`` qdiscs on the pair are this harness's; its iptables rules live in
the namespace's own tables (chain ``opsuite-netfault``), so the machine's are never touched.

Faults, each a context manager that removes what it added:

- ``partition()``: iptables DROP of every packet to and from the relay's port (the operator's
  TCP connections hang as in a real partition; its probes, on the namespace's own address,
  keep answering);
- ``loss(p)``: iptables ``statistic`` drop of a fraction ``p`` in each direction;
- ``delay(rtt)``: the relay holds every chunk ``rtt / 2`` in each direction. This kernel has no
  ``sch_netem`` (``tc qdisc add ... netem`` answers "Specified qdisc kind is unknown"), so the
  delay is the relay's: per chunk of bytes, in order, not per packet;
- ``bandwidth(kbit)``: ``tc tbf`` on both ends of the veth;
- ``reorder()``: a random fraction of the namespace's packets to the relay is marked (iptables
  ``statistic`` + ``DSCP`` in the namespace) and sent by ``tc htb`` + ``u32`` through a slow
  class, so they overtake each other as with netem's reordering;
- ``stall_streams()``: the API server stays reachable (requests are answered as usual) but
  what it sends on a watch stream is held: the relay withholds server bytes on a connection
  once the client has sent nothing for ``STREAM_AFTER`` seconds (a request's answer comes
  sooner; a watch's events come later), until the fault ends.

``python -m e2e.netns cleanup`` removes what a crashed run left: every namespace named
``opsuite-netfault-*`` (its processes are killed first) and every link named ``opsnf*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import yaml

NETNS_PREFIX = "opsuite-netfault-"
LINK_PREFIX = "opsnf"
CHAIN = "opsuite-netfault"
SUBNET = ipaddress.IPv4Network("10.250.0.0/16")
API_IP = os.environ.get("E2E_NETNS_API_IP", "10.244.0.1")
"""An address of this machine the API server's certificate names (the plane's bridge)."""
STREAM_AFTER = 2.0
"""Seconds without client bytes after which server bytes on a connection count as a stream."""
REORDER_MARK = 0x2E  # DSCP EF: the packets the reorder fault sends through the slow class


def available() -> str | None:
    """Why network namespaces cannot be used here (None when they can)."""
    if os.geteuid() != 0:
        return "needs root (ip netns, veth, tc, iptables)"
    for tool in ("ip", "tc", "iptables"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    with socket.socket() as probe:
        try:
            probe.bind((API_IP, 0))
        except OSError:
            return f"{API_IP} (E2E_NETNS_API_IP) is not an address of this machine"
    return None


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a command; raise with its stderr when ``check`` and it fails."""
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")
    return done


def _free_slot() -> ipaddress.IPv4Network:
    """A /30 of SUBNET that no interface of this machine uses."""
    used = run("ip", "-o", "-4", "addr", "show").stdout
    slots = list(SUBNET.subnets(new_prefix=30))
    for _ in range(100):
        slot = random.choice(slots)
        if str(slot.network_address + 1) + "/" not in used:
            return slot
    raise RuntimeError(f"no free /30 in {SUBNET}")


class Relay:
    """A TCP relay in a thread of its own: ``listen`` -> ``upstream``, with a delay per chunk
    and the watch-stream stall (see the module docstring). Counts connections."""

    def __init__(self, listen: tuple[str, int], upstream: tuple[str, int]) -> None:
        self.listen, self.upstream = listen, upstream
        self.one_way = 0.0
        self.stalled = False
        self.connections = 0
        self.held_chunks = 0
        self._loop = asyncio.new_event_loop()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._run, name="netns-relay", daemon=True)
        self._thread.start()
        if not self._ready.wait(10) or self._server is None:
            raise RuntimeError(f"relay on {listen} did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._serve, *self.listen)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    async def _serve(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            down_w.close()
            return
        last_client = [time.monotonic()]
        await asyncio.gather(
            self._pump(down_r, up_w, last_client, from_client=True),
            self._pump(up_r, down_w, last_client, from_client=False),
            return_exceptions=True,
        )
        for writer in (up_w, down_w):
            writer.close()

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        last_client: list[float],
        *,
        from_client: bool,
    ) -> None:
        """Copy ``reader`` to ``writer`` in order, each chunk ``one_way`` s late; server bytes
        of a stream wait while the stall lasts."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            holding = False
            while True:
                at, chunk = await queue.get()
                if not chunk:
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                    return
                if not from_client and not self._flowing.is_set():
                    holding = holding or at - last_client[0] > STREAM_AFTER
                if holding:
                    self.held_chunks += 1
                    await self._flowing.wait()
                    holding = False
                await asyncio.sleep(max(0.0, at + self.one_way - time.monotonic()))
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.create_task(send())
        try:
            while True:
                chunk = await reader.read(65536)
                now = time.monotonic()
                if from_client and chunk:
                    last_client[0] = now
                queue.put_nowait((now, chunk))
                if not chunk:
                    break
            await sender
        finally:
            sender.cancel()

    def stall(self, on: bool) -> None:
        """Start or end holding the server bytes of streams."""
        self.stalled = on
        self._loop.call_soon_threadsafe(self._flowing.clear if on else self._flowing.set)

    def close(self) -> None:
        """Stop serving, end every connection's tasks (each handles its cancellation), stop."""

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()


@dataclass
class NetNs:
    """A network namespace whose processes reach the API server only through ``relay``."""

    api_server: str
    """The API server's URL as the test's kubeconfig names it (the relay's upstream)."""
    name: str = field(default_factory=lambda: NETNS_PREFIX + uuid.uuid4().hex[:8])
    slot: ipaddress.IPv4Network = field(default_factory=_free_slot)
    relay: Relay | None = None

    @property
    def host_link(self) -> str:
        return f"{LINK_PREFIX}{self.name[-8:]}h"

    @property
    def ns_link(self) -> str:
        return f"{LINK_PREFIX}{self.name[-8:]}n"

    @property
    def host_ip(self) -> str:
        return str(self.slot.network_address + 1)

    @property
    def ip(self) -> str:
        """The namespace's address: what its processes' probes bind to."""
        return str(self.slot.network_address + 2)

    @property
    def relay_port(self) -> int:
        assert self.relay is not None
        return self.relay.listen[1]

    def exec_prefix(self) -> list[str]:
        """Prefix of a command run inside the namespace (``ip netns exec`` execs it: the PID
        is the command's)."""
        return ["ip", "netns", "exec", self.name]

    def ns(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(*self.exec_prefix(), *args, check=check)

    def create(self) -> NetNs:
        """Namespace, veth pair, addresses, the route to API_IP, the relay, the iptables chain."""
        run("ip", "netns", "add", self.name)
        try:
            run("ip", "link", "add", self.host_link, "type", "veth", "peer", "name", self.ns_link)
            run("ip", "link", "set", self.ns_link, "netns", self.name)
            run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_link)
            run("ip", "link", "set", self.host_link, "up")
            self.ns("ip", "link", "set", "lo", "up")
            self.ns("ip", "addr", "add", f"{self.ip}/30", "dev", self.ns_link)
            self.ns("ip", "link", "set", self.ns_link, "up")
            self.ns("ip", "route", "add", f"{API_IP}/32", "via", self.host_ip)
            self.ns("iptables", "-N", CHAIN)
            self.ns("iptables", "-A", "INPUT", "-j", CHAIN)
            self.ns("iptables", "-A", "OUTPUT", "-j", CHAIN)
            upstream = urlsplit(self.api_server)
            with socket.socket() as s:
                s.bind((API_IP, 0))
                port = s.getsockname()[1]
            self.relay = Relay((API_IP, port), (upstream.hostname or "", upstream.port or 443))
        except BaseException:
            self.delete()
            raise
        return self

    def delete(self) -> None:
        """Remove everything: the namespace's processes, the relay, the link, the namespace."""
        pids = run("ip", "netns", "pids", self.name, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
        if self.relay is not None:
            self.relay.close()
        run("ip", "link", "del", self.host_link, check=False)
        run("ip", "netns", "del", self.name, check=False)

    def kubeconfig(self, source: Path, target: Path) -> Path:
        """``source`` with its server replaced by the relay's address."""
        config = yaml.safe_load(source.read_text())
        for entry in config["clusters"]:
            entry["cluster"]["server"] = f"https://{API_IP}:{self.relay_port}"
        target.write_text(yaml.safe_dump(config))
        return target

    # --- faults ------------------------------------------------------------------------------

    def _rules(self, *matches: str) -> list[list[str]]:
        """The chain's rules for both directions of the relay's traffic, with ``matches``."""
        port = str(self.relay_port)
        return [
            ["-d", API_IP, "-p", "tcp", "--dport", port, *matches],
            ["-s", API_IP, "-p", "tcp", "--sport", port, *matches],
        ]

    @contextlib.contextmanager
    def _iptables(self, rules: list[list[str]], table: str = "filter") -> Iterator[None]:
        added: list[list[str]] = []
        try:
            for rule in rules:
                self.ns("iptables", "-t", table, "-A", *rule)
                added.append(rule)
            yield
        finally:
            for rule in added:
                self.ns("iptables", "-t", table, "-D", *rule, check=False)

    def partition(self) -> contextlib.AbstractContextManager[None]:
        """Drop every packet between the namespace and the API server."""
        return self._iptables([[CHAIN, *r] for r in self._rules("-j", "DROP")])

    def loss(self, fraction: float) -> contextlib.AbstractContextManager[None]:
        """Drop a random ``fraction`` of the packets in each direction."""
        match = ["-m", "statistic", "--mode", "random", "--probability", str(fraction)]
        return self._iptables([[CHAIN, *r] for r in self._rules(*match, "-j", "DROP")])

    @contextlib.contextmanager
    def delay(self, rtt: float) -> Iterator[None]:
        """Add ``rtt`` seconds to every round trip (half each way, in the relay)."""
        assert self.relay is not None
        self.relay.one_way = rtt / 2
        try:
            yield
        finally:
            self.relay.one_way = 0.0

    @contextlib.contextmanager
    def stall_streams(self) -> Iterator[None]:
        """Hold what the API server sends on watch streams; requests are answered."""
        assert self.relay is not None
        self.relay.stall(True)
        try:
            yield
        finally:
            self.relay.stall(False)

    @contextlib.contextmanager
    def bandwidth(self, kbit: int) -> Iterator[None]:
        """Limit each direction of the veth to ``kbit`` kbit/s (tc tbf)."""
        links = [(run, self.host_link), (self.ns, self.ns_link)]
        try:
            for cmd, link in links:
                cmd("tc", "qdisc", "add", "dev", link, "root", "tbf", "rate", f"{kbit}kbit",
                    "burst", "1600", "latency", "10s")  # fmt: skip
            yield
        finally:
            for cmd, link in links:
                cmd("tc", "qdisc", "del", "dev", link, "root", check=False)

    @contextlib.contextmanager
    def reorder(self, fraction: float, late: float = 0.05) -> Iterator[None]:
        """Send a random ``fraction`` of the packets to the API server through a class limited
        so that they lag about ``late`` s behind the others (htb + u32 on a DSCP mark)."""
        dev = ["dev", self.ns_link]
        kbit = max(8, int(1500 * 8 / late / 1000))  # one full packet per `late` seconds
        tos = ["match", "ip", "tos", hex(REORDER_MARK << 2), "0xfc"]
        self.ns("tc", "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "10")
        try:
            self.ns("tc", "class", "add", *dev, "parent", "1:", "classid", "1:10", "htb",
                    "rate", "1gbit")  # fmt: skip
            self.ns("tc", "class", "add", *dev, "parent", "1:", "classid", "1:20", "htb",
                    "rate", f"{kbit}kbit", "ceil", f"{kbit}kbit")  # fmt: skip
            self.ns("tc", "filter", "add", *dev, "parent", "1:", "protocol", "ip", "u32", *tos,
                    "flowid", "1:20")  # fmt: skip
            match = ["-m", "statistic", "--mode", "random", "--probability", str(fraction)]
            mark = ["-j", "DSCP", "--set-dscp", hex(REORDER_MARK)]
            with self._iptables([["OUTPUT", *self._rules(*match, *mark)[0]]], table="mangle"):
                yield
        finally:
            self.ns("tc", "qdisc", "del", *dev, "root", check=False)


def cleanup() -> list[str]:
    """Remove every namespace and link of this harness left by a crashed run; what was removed."""
    removed = []
    for line in run("ip", "netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(NETNS_PREFIX):
            NetNs(api_server="https://127.0.0.1", name=name, slot=SUBNET).delete()
            removed.append(f"netns {name}")
    for line in run("ip", "-o", "link", "show").stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0]
        if link.startswith(LINK_PREFIX):
            run("ip", "link", "del", link, check=False)
            removed.append(f"link {link}")
    return removed


def main(argv: list[str]) -> int:
    if argv != ["cleanup"]:
        print("usage: python -m e2e.netns cleanup", file=sys.stderr)
        return 2
    for item in cleanup():
        print(f"removed {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
