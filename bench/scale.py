"""All three operators at once, at scale, then a quiet window: memory, CPU and API requests.

Load (defaults): 100 PodSets of 30 pods in 10 namespaces (3,000 pods); 5 ConfigMapSyncs, each
copying its own source ConfigMap into the same 200 labelled namespaces (1,000 copies); 10
namespaces of 100 pods, each with a PodDebugger matching its 100 pods (1,000 injections). The
plane gets a fourth kwok node (4,400 pods of capacity).

The three operators run cluster-wide as local processes, each as its own ServiceAccount
(bound to cluster-admin: RBAC is not under test here), so every request it makes, its kopf
watches included, is attributed to it in the audit log. The benchmark waits until the work is
done (pods Running, PodSets ready, copies written, containers injected), lets the operators
settle, then opens the quiet window: nothing changes for ``quiet_s`` seconds. Reported per
operator: RSS when the window opens and when it closes (and sampled throughout), CPU seconds and
API requests by verb within the window. kube-controller-manager, which holds the same 4,000 pods
in its informers, is measured alongside as the reference.

Then the operator with the largest RSS is restarted under tracemalloc (bench.memprofile), left to
sync, and its top allocators are dumped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bench import configmapsync as cms_bench
from bench import plane
from bench.audit import AuditTail, by_user, by_user_prefix, in_window, request_summary
from bench.cpu import CpuMeter, RssSampler, plane_pid, rss_mib
from bench.objwatch import Arm, Tracker, timed_parallel, wide_client
from bench.operator import OperatorProcess
from bench.plane import AUDIT_LOG, KUBECONFIG, LOCAL, ROOT, read, request, request_json
from bench.runner import Environment, measure, write_document
from opsuite_common.kube import resource_path
from opsuite_packaging.operators import OPERATORS as LISTED

RUN_LABEL = "opsuite.dev/scale"
IDENTITY_NAMESPACE = "opsuite-bench-scale"
NO_POLICIES = {"OPSUITE_ALLOW_WITHOUT_ADMISSION_POLICY": "true"}
"""The bench installs no admission policies: the PodDebugger operator opts out of needing them
(the other operators ignore the variable)."""
OPERATORS = tuple(op.image for op in LISTED)
REFERENCE = "kube-controller-manager"
KCM_USERS = ("system:serviceaccount:kube-system:", "system:kube-controller-manager")
"""kube-controller-manager's identities (it runs each controller as its own ServiceAccount)."""
FAKE_NODES = 4
LOG_DIR = LOCAL / "bench"
MAX_RSS_MIB = 120.0


@dataclass(frozen=True)
class Config:
    """What to run."""

    podsets: int = 100
    pods_per_podset: int = 30
    podset_namespaces: int = 10
    sync_namespaces: int = 200
    configmaps: int = 5
    debug_pods: int = 1000
    debug_namespaces: int = 10
    quiet_s: float = 600.0
    settle_s: float = 60.0
    """Seconds between "work done" and the quiet window (trailing status writes, Events)."""
    sample_s: float = 5.0
    timeout: float = 900.0
    profile: bool = True
    """Restart the largest operator under tracemalloc after the window and dump its profile."""


@dataclass
class Result:
    """Everything measured; times in seconds from the first create unless said otherwise."""

    run_id: str = ""
    converged_s: dict[str, float] = field(default_factory=dict)
    window: tuple[float, float] = (0.0, 0.0)
    """The quiet window, seconds since the epoch."""
    rss_synced_mib: dict[str, float] = field(default_factory=dict)
    rss_end_mib: dict[str, float] = field(default_factory=dict)
    rss_series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Per process: (seconds since the operators started, MiB)."""
    phases: dict[str, float] = field(default_factory=dict)
    """When the load started, was done and the window opened/closed (series' clock)."""
    cpu_setup_s: dict[str, float] = field(default_factory=dict)
    cpu_quiet_s: dict[str, float] = field(default_factory=dict)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per process: :func:`bench.audit.request_summary` of its requests in the window."""
    watch_streams: dict[str, int] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    load_average: list[float] = field(default_factory=list)
    """1-minute load average at the start, when the window opened and when it closed."""


def _user(command: str) -> str:
    return f"system:serviceaccount:{IDENTITY_NAMESPACE}:{command}"


def _ignore_conflict(call: Callable[[], object]) -> None:
    try:
        call()
    except ApiException as exc:
        if exc.status != 409:
            raise


def identity_kubeconfig(api: client.ApiClient, command: str) -> Path:
    """A kubeconfig for ServiceAccount ``command`` (cluster-admin) in IDENTITY_NAMESPACE."""
    ns, core = IDENTITY_NAMESPACE, "v1"
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": command}}
    _ignore_conflict(
        lambda: request_json(api, "POST", resource_path(core, "serviceaccounts", ns), body=sa)
    )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ns}-{command}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "cluster-admin",
        },
        "subjects": [{"kind": "ServiceAccount", "name": command, "namespace": ns}],
    }
    rbac = "rbac.authorization.k8s.io/v1"
    _ignore_conflict(
        lambda: request_json(api, "POST", resource_path(rbac, "clusterrolebindings"), body=binding)
    )
    token_request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 6 * 3600},
    }
    path = resource_path(core, "serviceaccounts", ns, command, "token")
    token = request_json(api, "POST", path, body=token_request)["status"]["token"]
    admin = yaml.safe_load(KUBECONFIG.read_text())
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": command, "user": {"token": token}}],
        "contexts": [{"name": command, "context": {"cluster": "local", "user": command}}],
        "current-context": command,
    }
    out = LOG_DIR / f"scale-{command}.kubeconfig"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(kubeconfig))
    out.chmod(0o600)
    return out


def _namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A namespace that takes ConfigMapSync copies from any namespace."""
    metadata = {"name": name, "labels": labels, "annotations": {cms_bench.ACCEPT_FROM: "*"}}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def _podset(name: str, replicas: int, run_id: str) -> dict[str, Any]:
    labels = {"app": name, RUN_LABEL: run_id}
    return {
        "apiVersion": "apps.opsuite.dev/v1alpha1",
        "kind": "PodSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {"name": "main", "image": "busybox", "command": ["sleep", "3600"]}
                    ]
                },
            },
        },
    }


def _debugger(max_pods: int) -> dict[str, Any]:
    return {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "debug-targets"},
        "spec": {
            "selector": {"matchLabels": {"app": "debug-target"}},
            "image": "busybox",
            "command": ["sleep", "3600"],
            "maxPods": max_pods,
        },
    }


def _debug_pod(name: str, run_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "debug-target", RUN_LABEL: run_id}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]},
    }


def _sync(name: str, source: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": cms_bench.GROUP_VERSION,
        "kind": "ConfigMapSync",
        "metadata": {"name": name},
        "spec": {"configMapName": source, "namespaceSelector": {"matchLabels": {label: "true"}}},
    }


def _pod_summary(pod: dict[str, Any]) -> tuple[str, int]:
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    return phase, len((pod.get("spec") or {}).get("ephemeralContainers") or ())


@dataclass
class Layout:
    """The run's namespaces."""

    run_id: str
    config: Config
    podset_ns: list[str] = field(default_factory=list)
    debug_ns: list[str] = field(default_factory=list)
    sync_ns: list[str] = field(default_factory=list)
    source_ns: str = ""

    def __post_init__(self) -> None:
        prefix = f"scale-{self.run_id}"
        c = self.config
        self.podset_ns = [f"{prefix}-ps{i:02d}" for i in range(c.podset_namespaces)]
        self.debug_ns = [f"{prefix}-pd{i:02d}" for i in range(c.debug_namespaces)]
        self.sync_ns = [f"{prefix}-d{i:03d}" for i in range(c.sync_namespaces)]
        self.source_ns = f"{prefix}-src"

    @property
    def all(self) -> list[str]:
        """Every namespace of the run."""
        return [*self.podset_ns, *self.debug_ns, self.source_ns, *self.sync_ns]


def _wait_sa(api: client.ApiClient, namespaces: list[str], timeout: float) -> None:
    """Wait for each namespace's default ServiceAccount (pods are refused until it exists)."""
    deadline = time.monotonic() + timeout
    for ns in namespaces:
        path = resource_path("v1", "serviceaccounts", ns, "default")
        while True:
            try:
                read(request(api, "GET", path))
                break
            except ApiException as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def _podsets_ready(api: client.ApiClient, expected: int, replicas: int, run_id: str) -> bool:
    listed = request_json(api, "GET", resource_path("apps.opsuite.dev/v1alpha1", "podsets"))
    ready = 0
    for ps in listed.get("items") or []:
        if not ps["metadata"]["namespace"].startswith(f"scale-{run_id}-"):
            continue
        status = ps.get("status") or {}
        if (
            status.get("observedGeneration") == ps["metadata"].get("generation")
            and (status.get("readyReplicas") or 0) == replicas
        ):
            ready += 1
    return ready >= expected


def create_load(
    api: client.ApiClient,
    wide: client.ApiClient,
    layout: Layout,
    debug_running: Arm,
    progress: Callable[[str], None],
) -> None:
    """Create the namespaces and every object of the load; the PodDebuggers once
    ``debug_running`` (their pods Running) fired."""
    c, run_id = layout.config, layout.run_id
    sync_label = f"{RUN_LABEL}-sync-{run_id}"
    base = {RUN_LABEL: run_id}
    post = _poster(wide)
    timed_parallel(
        lambda ns: post(resource_path("v1", "namespaces"), _namespace(ns, base)),
        [*layout.podset_ns, *layout.debug_ns, layout.source_ns],
    )
    timed_parallel(
        lambda ns: post(
            resource_path("v1", "namespaces"), _namespace(ns, {**base, sync_label: "true"})
        ),
        layout.sync_ns,
    )
    _wait_sa(api, [*layout.podset_ns, *layout.debug_ns], c.timeout)
    progress(f"{len(layout.all)} namespaces created")
    group = "apps.opsuite.dev/v1alpha1"
    podsets = [(layout.podset_ns[i % len(layout.podset_ns)], i) for i in range(c.podsets)]
    timed_parallel(
        lambda item: post(
            resource_path(group, "podsets", item[0]),
            _podset(f"ps-{item[1]:03d}", c.pods_per_podset, run_id),
        ),
        podsets,
    )
    for i in range(c.configmaps):
        body = cms_bench._configmap(f"settings-{i}", "0")
        post(resource_path("v1", "configmaps", layout.source_ns), body)
        post(
            resource_path(cms_bench.GROUP_VERSION, "configmapsyncs", layout.source_ns),
            _sync(f"sync-{i}", f"settings-{i}", sync_label),
        )
    pods = [
        (layout.debug_ns[i % len(layout.debug_ns)], f"dbg-{i:04d}") for i in range(c.debug_pods)
    ]
    timed_parallel(
        lambda item: post(resource_path("v1", "pods", item[0]), _debug_pod(item[1], run_id)), pods
    )
    # kwok (0.8.0) fails its pod-ready stage, and retries it for minutes, on a pod that gained
    # an ephemeral container before it was Running ("may specify no more than one IP for each
    # IP family"); debugging Running pods is the usual case anyway.
    debug_running.wait(c.timeout)
    per_ns = -(-c.debug_pods // len(layout.debug_ns))
    for ns in layout.debug_ns:
        post(resource_path("debug.opsuite.dev/v1alpha1", "poddebuggers", ns), _debugger(per_ns))
    progress(
        f"{c.podsets} PodSets, {c.configmaps} ConfigMapSyncs, {len(layout.debug_ns)} "
        f"PodDebuggers and {c.debug_pods} pods created"
    )


def _poster(api: client.ApiClient) -> Callable[[str, dict[str, Any]], None]:
    """POST ``body`` to ``path`` (no response needed)."""

    def post(path: str, body: dict[str, Any]) -> None:
        read(request(api, "POST", path, body=body))

    return post


class Converged:
    """Watches that tell when each operator's share of the load is done."""

    def __init__(self, api: client.ApiClient, layout: Layout) -> None:
        c = layout.config
        self.layout = layout
        self.pods: Tracker[tuple[str, int]] = Tracker(
            api,
            resource_path("v1", "pods"),
            _pod_summary,
            label_selector=f"{RUN_LABEL}={layout.run_id}",
        ).start()
        self.copies: Tracker[str] = Tracker(
            api,
            resource_path("v1", "configmaps"),
            cms_bench._version,
            label_selector=cms_bench.OWNER_LABEL,
        ).start()
        podset_ns, debug_ns, sync_ns = (
            set(layout.podset_ns),
            set(layout.debug_ns),
            set(layout.sync_ns),
        )
        self.running = self.pods.arm(
            "PodSet pods Running",
            lambda k, s: k[0] in podset_ns and s[0] == "Running",
            c.podsets * c.pods_per_podset,
        )
        self.debug_running = self.pods.arm(
            "debug pods Running", lambda k, s: k[0] in debug_ns and s[0] == "Running", c.debug_pods
        )
        self.injected = self.pods.arm(
            "debug pods injected", lambda k, s: k[0] in debug_ns and s[1] >= 1, c.debug_pods
        )
        self.copied = self.copies.arm(
            "copies written", lambda k, _s: k[0] in sync_ns, c.sync_namespaces * c.configmaps
        )

    def stop(self) -> None:
        """Stop the watches."""
        self.pods.stop()
        self.copies.stop()


def _progress_line(conv: Converged) -> str:
    return (
        f"pods Running {len(conv.running.times)}/{conv.running.count}, "
        f"injected {len(conv.injected.times)}/{conv.injected.count}, "
        f"copies {len(conv.copied.times)}/{conv.copied.count}"
    )


def wait_converged(
    api: client.ApiClient,
    conv: Converged,
    began: float,
    operators: dict[str, OperatorProcess],
    progress: Callable[[str], None],
) -> dict[str, float]:
    """Wait until all work is done; seconds from ``began`` to each milestone."""
    c, run_id = conv.layout.config, conv.layout.run_id
    deadline = time.monotonic() + c.timeout
    done: dict[str, float] = {}
    last_report = 0.0
    while True:
        now = time.monotonic()
        for name, arm in (
            ("podset pods Running", conv.running),
            ("poddebugger containers injected", conv.injected),
            ("configmapsync copies written", conv.copied),
        ):
            if arm.done and name not in done:
                done[name] = round(max(arm.times.values()) - began, 1)
        if (
            "podsets ready" not in done
            and conv.running.done
            and _podsets_ready(api, c.podsets, c.pods_per_podset, run_id)
        ):
            done["podsets ready"] = round(time.monotonic() - began, 1)
        if len(done) == 4:
            return done
        for command, operator in operators.items():
            if not operator.alive():
                raise RuntimeError(f"{command} exited; see {operator.log_path}")
        if now > deadline:
            raise TimeoutError(f"load not done after {c.timeout:.0f} s: {_progress_line(conv)}")
        if now - last_report > 30:
            progress(_progress_line(conv))
            last_report = now
        time.sleep(2.0)


def profile_largest(
    result: Result,
    operators: dict[str, OperatorProcess],
    kubeconfigs: dict[str, Path],
    progress: Callable[[str], None],
    timeout: float,
) -> None:
    """Restart the operator with the largest RSS under tracemalloc; dump its top allocators."""
    largest = max(OPERATORS, key=lambda c: result.rss_end_mib.get(c, 0.0))
    operators[largest].stop()
    dump = LOG_DIR / f"scale-{largest}-tracemalloc.json"
    dump.unlink(missing_ok=True)
    launcher = [sys.executable, "-X", "tracemalloc=10", "-m", "bench.memprofile"]
    traced = OperatorProcess(
        largest,
        [],
        LOG_DIR / f"scale-{largest}-tracemalloc.log",
        kubeconfig=kubeconfigs[largest],
        launcher=[*launcher, str(dump)],
        env={"PYTHONPATH": str(ROOT), **NO_POLICIES},
        executable=Path(sys.executable).parent / largest,  # the wrapper's virtualenv
    )
    began = time.monotonic()
    traced.start(ready_timeout=timeout)
    synced_s = time.monotonic() - began
    time.sleep(30.0)  # its first reconciles of every object
    pid = traced.pid
    assert pid is not None
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not dump.exists() and time.monotonic() < deadline:
        time.sleep(1.0)
    rss = rss_mib(pid)
    traced.stop()
    if not dump.exists():
        raise TimeoutError(f"no tracemalloc dump from {largest} in {dump}")
    result.profile = {
        "operator": largest,
        "synced_s": round(synced_s, 1),
        "rss_under_tracemalloc_mib": round(rss or 0.0, 1),
        **json.loads(dump.read_text()),
    }
    progress(f"profiled {largest}: {result.profile['traced_mib']} MiB traced")


def run(api: client.ApiClient, config: Config, progress: Callable[[str], None] = print) -> Result:
    """Set up, load, measure the quiet window, profile; clean up however this ends."""
    for op in LISTED:
        plane.apply_crds(op.chart / "crds", *op.crds)
    wide = wide_client()
    run_id = secrets.token_hex(3)
    layout = Layout(run_id, config)
    result = Result(run_id=run_id, load_average=[os.getloadavg()[0]])
    _ignore_conflict(
        lambda: request_json(
            api, "POST", resource_path("v1", "namespaces"), body=_namespace(IDENTITY_NAMESPACE, {})
        )
    )
    kubeconfigs = {c: identity_kubeconfig(api, c) for c in OPERATORS}
    operators = {
        c: OperatorProcess(
            c, [], LOG_DIR / f"scale-{c}.log", kubeconfig=kubeconfigs[c], env=dict(NO_POLICIES)
        )
        for c in OPERATORS
    }
    conv: Converged | None = None
    sampler: RssSampler | None = None
    try:
        origin = time.monotonic()
        for operator in operators.values():
            operator.start()
        pids = {c: o.pid for c, o in operators.items()} | {REFERENCE: plane_pid(REFERENCE)}
        sampler = RssSampler(pids, config.sample_s, origin).start()
        progress(f"operators ready: {', '.join(f'{c} pid {o.pid}' for c, o in operators.items())}")
        setup_cpu = CpuMeter(pids)
        setup_cpu.start()
        conv = Converged(api, layout)
        began = time.monotonic()
        result.phases["load started"] = round(began - origin, 1)
        create_load(api, wide, layout, conv.debug_running, progress)
        result.converged_s = wait_converged(api, conv, began, operators, progress)
        result.phases["load done"] = round(time.monotonic() - origin, 1)
        progress(f"load done: {result.converged_s}")
        conv.stop()
        conv = None
        time.sleep(config.settle_s)
        result.cpu_setup_s = setup_cpu.stop()

        # --- the quiet window
        audit = AuditTail(AUDIT_LOG, "")
        quiet = CpuMeter(pids)
        quiet.start()
        start_wall = time.time()
        result.phases["window opened"] = round(time.monotonic() - origin, 1)
        result.rss_synced_mib = sampler.sample()
        result.load_average.append(os.getloadavg()[0])
        progress(f"quiet window of {config.quiet_s:.0f} s opened; RSS {result.rss_synced_mib}")
        window_end = time.monotonic() + config.quiet_s
        while time.monotonic() < window_end:
            time.sleep(min(10.0, max(0.0, window_end - time.monotonic())))
            audit.poll()
            for command, operator in operators.items():
                if not operator.alive():
                    raise RuntimeError(f"{command} exited; see {operator.log_path}")
        end_wall = time.time()
        result.cpu_quiet_s = quiet.stop()
        result.rss_end_mib = sampler.sample()
        result.phases["window closed"] = round(time.monotonic() - origin, 1)
        result.load_average.append(os.getloadavg()[0])
        result.window = (start_wall, end_wall)
        audit.flush(api, IDENTITY_NAMESPACE)
        events = list(audit.events.values())
        audit.close()
        for command in OPERATORS:
            mine = in_window(events, by_user(_user(command)), start_wall, end_wall)
            result.requests[command] = request_summary(mine)
        kcm = in_window(events, by_user_prefix(*KCM_USERS), start_wall, end_wall)
        result.requests[REFERENCE] = request_summary(kcm)
        progress(f"quiet window closed; RSS {result.rss_end_mib}")
        sampler.stop()
        result.rss_series = {k: list(v) for k, v in sampler.samples.items()}
        sampler = None
        if config.profile:
            try:
                profile_largest(result, operators, kubeconfigs, progress, config.timeout)
            except (OSError, RuntimeError, TimeoutError) as exc:
                result.profile = {"error": str(exc)}
                progress(f"profile failed: {exc}")
        return result
    finally:
        if sampler is not None:
            sampler.stop()
            result.rss_series = {k: list(v) for k, v in sampler.samples.items()}
        if conv is not None:
            conv.stop()
        cleanup(api, wide, layout, operators, progress)


def cleanup(
    api: client.ApiClient,
    wide: client.ApiClient,
    layout: Layout,
    operators: dict[str, OperatorProcess],
    progress: Callable[[str], None],
) -> None:
    """Delete the syncs while their operator runs, stop the operators, delete the namespaces."""
    path = resource_path(cms_bench.GROUP_VERSION, "configmapsyncs", layout.source_ns)
    syncs = [f"sync-{i}" for i in range(layout.config.configmaps)]
    for name in syncs:
        with contextlib.suppress(ApiException):
            read(request(api, "DELETE", f"{path}/{name}"))
    deadline = time.monotonic() + 60.0
    while operators["configmapsync-operator"].alive() and time.monotonic() < deadline:
        with contextlib.suppress(ApiException):
            if not request_json(api, "GET", path).get("items"):
                break
        time.sleep(1.0)
    for operator in operators.values():
        operator.stop()
    for name in syncs:
        with contextlib.suppress(ApiException):
            read(
                request(
                    api,
                    "PATCH",
                    f"{path}/{name}",
                    body={"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
            )
    progress(f"deleting {len(layout.all)} namespaces scale-{layout.run_id}-*")
    left = cms_bench.delete_namespaces(wide, layout.all, timeout=300.0)
    if left:
        progress(f"warning: {left} namespaces still terminating")


OUTPUT = LOCAL / "measurements" / "bench-scale.json"


def goals(result: Result) -> list[dict[str, Any]]:
    """Per operator and goal: the figure, kube-controller-manager's in the same window, met."""
    rows: list[dict[str, Any]] = []
    ref_requests = result.requests.get(REFERENCE, {})
    for command in OPERATORS:
        req = result.requests.get(command, {})
        figures = [
            ("rss_synced_mib", "RSS after the initial sync (MiB)", result.rss_synced_mib),
            ("rss_end_mib", "RSS after the quiet window (MiB)", result.rss_end_mib),
        ]
        for metric, label, values in figures:
            value = values.get(command, float("nan"))
            rows.append(
                _row(command, metric, label, value, values.get(REFERENCE), value <= MAX_RSS_MIB)
            )
        cpu = result.cpu_quiet_s.get(command, float("nan"))
        rows.append(
            _row(
                command,
                "cpu_quiet_s",
                "CPU seconds in the quiet window",
                cpu,
                result.cpu_quiet_s.get(REFERENCE),
                None,
            )
        )
        for metric, label in (
            ("writes", "write requests in the window"),
            ("lists", "LIST requests in the window"),
            ("watches", "WATCH requests in the window"),
        ):
            value = float(req.get(metric, 0))
            met = value == 0 if metric != "watches" else None
            rows.append(_row(command, metric, label, value, ref_requests.get(metric), met))
    return rows


def _row(
    operator: str, metric: str, label: str, value: float, reference: float | None, met: bool | None
) -> dict[str, Any]:
    ratio = value / reference if reference else None
    return {
        "operator": operator,
        "metric": metric,
        "label": label,
        "value": value,
        "reference": reference,
        "ratio": ratio,
        "met": met,
    }


def table(result: Result, config: Config) -> str:
    """Plain-text report."""
    lines = [
        f"Scale: {config.podsets} PodSets x {config.pods_per_podset} pods, {config.configmaps} "
        f"ConfigMapSyncs x {config.sync_namespaces} namespaces, {config.debug_pods} debugged pods; "
        f"quiet window {config.quiet_s:.0f} s (reference: {REFERENCE})",
        f"load done (s after the first create): {result.converged_s}",
        "",
        f"{'process':24} {'RSS synced':>10} {'RSS end':>8} {'CPU s':>6}  requests by verb",
    ]
    for name in (*OPERATORS, REFERENCE):
        req = result.requests.get(name, {})
        lines.append(
            f"{name:24} {result.rss_synced_mib.get(name, float('nan')):10.1f} "
            f"{result.rss_end_mib.get(name, float('nan')):8.1f} "
            f"{result.cpu_quiet_s.get(name, float('nan')):6.2f}  {req.get('by_verb', {})}"
        )
    if result.profile.get("by_caller"):
        p = result.profile
        lines += ["", f"tracemalloc of {p['operator']}: {p['traced_mib']} MiB traced; top callers:"]
        lines += [f"  {c['mib']:7.2f} MiB  {c['caller']}" for c in p["by_caller"][:8]]
    return "\n".join(lines)


def main(
    args: argparse.Namespace,
    environment: Environment,
) -> int:
    """Run the scale benchmark; the exit status (0 done, 1 missed with --strict; runner.Failed)."""
    config = Config(
        quiet_s=args.quiet_window if args.quiet_window is not None else Config.quiet_s,
        settle_s=args.settle,
        timeout=max(args.timeout, Config.timeout),
        profile=not args.no_profile,
    )
    output = Path(args.output or OUTPUT)
    result, env = measure(
        lambda api: run(api, config),
        environment,
        f"scale benchmark failed (operator logs: {LOG_DIR}/scale-*.log)",
        fake_nodes=FAKE_NODES,
    )
    print()
    print(table(result, config))
    rows = goals(result)
    document = {
        "benchmark": "scale",
        "config": asdict(config),
        "environment": env,
        "result": asdict(result),
        "summary": rows,
        "targets_met": all(r["met"] is not False for r in rows),
    }
    return write_document(output, document, strict=args.strict)
