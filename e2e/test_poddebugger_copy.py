"""PodDebugger mode Copy (kubectl debug --copy-to --share-processes), on the real node: the copy
runs the debug container beside the application's, sees its process, is selected by no Service,
and goes with its PodDebugger."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from e2e.cluster import Cluster, wait_until
from e2e.placement import BUSYBOX, SLEEP, real_pod_spec, sleeper
from e2e.poddebugger_support import Debuggers, doc_examples
from poddebugger_operator.copies import COPY_LABEL, COPY_OF, copy_name

PS_PROBE = ["sh", "-c", "ps; sleep 3600"]
"""What the debug container prints: every process it sees."""


def _slice_pods(api: client.ApiClient, namespace: str, service: str) -> set[str]:
    """Pods the Service's EndpointSlices list (ready or not)."""
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    return {
        e.target_ref.name
        for s in slices.items
        for e in s.endpoints or []
        if e.target_ref is not None
    }


def test_copy_mode_debugs_a_copy_no_service_selects_and_deletes_it_with_the_debugger(
    cluster: Cluster, api: client.ApiClient, debuggers: Debuggers, namespace: str
) -> None:
    """An application that never gets Ready (its readiness probe fails) behind a Service: the
    PodDebugger in mode Copy leaves it alone and creates one copy, with the debug container
    as a regular container sharing the application's process namespace (its ps lists the
    application's sleep), the profile's securityContext, no probes, none of the original's
    labels (the Service's EndpointSlices list the original only) and the PodDebugger as
    controller owner (deleting it deletes the copy). A second pass creates nothing more."""
    labels = {"app": "copied"}
    app = sleeper()
    app["readinessProbe"] = {"exec": {"command": ["false"]}, "periodSeconds": 2}
    spec = real_pod_spec(api, containers=[app])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "labels": labels}}
    debuggers.core.create_namespaced_pod(namespace, {**pod, "spec": spec})
    debuggers.core.create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": labels, "ports": [{"port": 80}]},
        },
    )
    (example,) = doc_examples("Copy mode")  # docs/poddebugger.md shows what is applied
    assert example["spec"] == {
        "mode": "Copy",
        "selector": {"matchLabels": labels},
        "image": BUSYBOX,
        "command": PS_PROBE[:2],
        "args": PS_PROBE[2:],
    }
    debuggers.create(namespace, example)
    name = copy_name("copy", "app")
    obj = debuggers.wait(
        namespace,
        "copy",
        lambda o: any(
            c.get("copyPod") == name and c.get("state") == "Running"
            for c in o.get("status", {}).get("debuggedPods") or []
        ),
        "the copy's debug container Running in the status",
        timeout=150,
    )
    original = debuggers.pod(namespace, "app")
    assert not original.spec.ephemeral_containers
    copy = debuggers.pod(namespace, name)
    assert copy.metadata.labels == {COPY_LABEL: obj["metadata"]["uid"]}
    assert copy.metadata.annotations == {COPY_OF: "app"}
    (owner,) = copy.metadata.owner_references
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "PodDebugger",
        "copy",
        obj["metadata"]["uid"],
        True,
        True,
    )
    assert copy.spec.node_name == original.spec.node_name  # scheduled anew, on the real node
    assert copy.spec.share_process_namespace is True
    main, debug = copy.spec.containers
    assert (main.name, main.readiness_probe) == ("main", None)
    assert debug.name == obj["status"]["debuggedPods"][0]["container"]
    assert debug.security_context.run_as_non_root is True
    assert debug.security_context.capabilities.drop == ["ALL"]

    # The debug container sees the application's process: one PID namespace.
    output: str = wait_until(
        lambda: cluster.kubectl("logs", name, "-n", namespace, "-c", debug.name),
        lambda out: "PID" in out,
        timeout=120,
        what="the debug container printing its processes",
    )
    print("the copy's debug container printed:\n" + output)
    assert any(line.split()[-2:] == list(SLEEP) for line in output.splitlines()), output

    # The Service lists the original, never the copy.
    assert wait_until(
        lambda: _slice_pods(api, namespace, "web"),
        lambda pods: "app" in pods,
        timeout=60,
        what="the Service's EndpointSlice listing the original",
    ) == {"app"}
    events: list[Any] = debuggers.events(namespace, "PodDebugger", "copy")
    (created,) = [e for e in events if e.reason == "DebugCopyCreated"]
    assert name in created.message, created.message
    assert [p.metadata.name for p in debuggers.core.list_namespaced_pod(namespace).items] == [
        "app",
        name,
    ]

    debuggers.delete(namespace, "copy")
    wait_until(
        lambda: {p.metadata.name for p in debuggers.core.list_namespaced_pod(namespace).items},
        lambda pods: pods == {"app"},
        timeout=90,
        what="the copy deleted with its PodDebugger",
    )
    assert _slice_pods(api, namespace, "web") == {"app"}


def test_a_copy_name_another_pod_holds_is_reported_then_taken_once_free(
    api: client.ApiClient, debuggers: Debuggers, namespace: str
) -> None:
    """A pod of the copy's name that is not this PodDebugger's copy is never touched: the pod
    to copy is reported (CopyNameTaken, in the status and as an Event), nothing is POSTed
    again and again; once that pod is gone the copy is made."""
    labels = {"app": "squatted"}
    spec = real_pod_spec(api, containers=[sleeper()])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "labels": labels}}
    debuggers.core.create_namespaced_pod(namespace, {**pod, "spec": spec})
    name = copy_name("squat", "app")
    squatter = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    uid = debuggers.core.create_namespaced_pod(namespace, squatter).metadata.uid
    debugger = {
        "apiVersion": "debug.opsuite.dev/v1alpha1",
        "kind": "PodDebugger",
        "metadata": {"name": "squat"},
        "spec": {"mode": "Copy", "selector": {"matchLabels": labels}, "image": BUSYBOX},
    }
    debuggers.create(namespace, debugger)
    reported = debuggers.wait(
        namespace,
        "squat",
        lambda o: any(
            f.get("reason") == "CopyNameTaken" for f in o.get("status", {}).get("failedPods") or []
        ),
        "CopyNameTaken in the status",
    )
    (failed,) = reported["status"]["failedPods"]
    assert failed["pod"] == "app"
    assert name in failed["message"]
    kept = debuggers.pod(namespace, name)
    assert (kept.metadata.uid, kept.metadata.owner_references) == (uid, None)
    assert any(e.reason == "CopyNameTaken" for e in debuggers.events(namespace, "Pod", "app")), (
        "no Event on the pod"
    )

    debuggers.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    copy = wait_until(
        lambda: {p.metadata.name: p for p in debuggers.core.list_namespaced_pod(namespace).items},
        lambda pods: name in pods and pods[name].metadata.uid != uid,
        timeout=90,
        what="the copy made once its name was free",
    )[name]
    assert copy.metadata.labels == {COPY_LABEL: reported["metadata"]["uid"]}
