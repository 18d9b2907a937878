"""PodSet rollouts a user steers: pause and resume, revision history and rollback, with pods
that run on the real node.

The kubectl commands are the ones docs/podset.md shows, in the same form. Few pods (at most four
at a time): the local real node has two cores.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from kubernetes import client

from e2e.cluster import Cluster, condition, wait_until
from e2e.operators import OperatorHandle
from e2e.placement import real_pod_spec
from e2e.podset_support import GROUP, PLURAL, VERSION, PodSets, podset
from podset_operator.models import NAME_LABEL
from podset_operator.template import template_hash

TEMPLATE_HASH_LABEL = "opsuite.dev/pod-template-hash"
PAUSED_WATCH_SECONDS = 8
"""How long a paused PodSet with a changed template is watched for a rollout (none may come)."""
STRATEGY = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _running_and_ready(podsets: PodSets, selector: str, count: int) -> list[client.V1Pod]:
    """Exactly ``count`` active pods, each Running and Ready (on the real node: a kubelet's)."""
    return wait_until(
        lambda: podsets.active_pods(selector),
        lambda pods: (
            len(pods) == count and all(p.status.phase == "Running" and _ready(p) for p in pods)
        ),
        timeout=120,
        what=f"{count} pods matching {selector} Running and Ready",
    )


def _hashes(pods: list[client.V1Pod]) -> set[str]:
    return {p.metadata.labels[TEMPLATE_HASH_LABEL] for p in pods}


def _real_podset(api: client.ApiClient, name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    body = podset(name, replicas, **spec)
    body["spec"]["template"]["spec"] = real_pod_spec(api)
    return body


def _progressing(ps: dict[str, Any]) -> tuple[str, str]:
    found = condition(ps, "Progressing")
    return found.get("status", ""), found.get("reason", "")


def _patch(cluster: Cluster, namespace: str, name: str, patch: dict[str, Any]) -> None:
    """``kubectl patch pset/NAME --type=merge -p '...'`` as docs/podset.md shows it."""
    cluster.kubectl(
        "patch", f"pset/{name}", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )


def test_paused_podset_scales_but_rolls_out_only_when_resumed(
    cluster: Cluster,
    api: client.ApiClient,
    podset_op: OperatorHandle,
    podsets: PodSets,
    namespace: str,
) -> None:
    """Paused: a template change replaces no pod for PAUSED_WATCH_SECONDS and Progressing says
    Paused; kubectl scale still adds a pod, of the pods' template. Resumed: every pod is
    replaced from the new template, and they run and get Ready on the real node."""
    name, selector = "web", "app=web"
    podsets.create(_real_podset(api, name, 2, updateStrategy=STRATEGY))
    before = _running_and_ready(podsets, selector, 2)
    (old_hash,) = _hashes(before)

    _patch(cluster, namespace, name, {"spec": {"paused": True}})
    version_2 = {"spec": {"template": {"metadata": {"annotations": {"version": "2"}}}}}
    _patch(cluster, namespace, name, version_2)
    ps = podsets.wait_status(name)
    assert _progressing(ps) == ("Unknown", "Paused"), ps["status"]
    assert "0/2 updated" in condition(ps, "Progressing")["message"], ps["status"]
    time.sleep(PAUSED_WATCH_SECONDS)
    pods = podsets.pods(selector)
    assert {p.metadata.name for p in pods} == {p.metadata.name for p in before}, "a rollout began"
    assert _hashes(pods) == {old_hash}

    cluster.kubectl("scale", f"pset/{name}", "-n", namespace, "--replicas=3")
    scaled = _running_and_ready(podsets, selector, 3)
    assert {p.metadata.name for p in before} <= {p.metadata.name for p in scaled}
    # The pod added while paused runs the pods' template, as a paused Deployment scales its
    # existing ReplicaSet: the waiting one is not rolled out by scaling.
    assert _hashes(scaled) == {old_hash}
    assert {(p.metadata.annotations or {}).get("version") for p in scaled} == {None}
    ps = podsets.wait_status(name, replicas=3, readyReplicas=3)
    assert _progressing(ps) == ("Unknown", "Paused"), ps["status"]

    _patch(cluster, namespace, name, {"spec": {"paused": False}})
    resumed = wait_until(
        lambda: podsets.active_pods(selector),
        lambda pods: (
            len(pods) == 3
            and old_hash not in _hashes(pods)
            and all(p.status.phase == "Running" and _ready(p) for p in pods)
        ),
        timeout=180,
        what="3 pods of the new template Running and Ready",
    )
    assert not {p.metadata.name for p in before} & {p.metadata.name for p in resumed}
    cluster.kubectl(
        "wait",
        f"pset/{name}",
        "-n",
        namespace,
        '--for=jsonpath={.status.conditions[?(@.type=="Progressing")].reason}=Complete',
        "--timeout=60s",
    )
    ps = podsets.wait_status(name, replicas=3, updatedReplicas=3, availableReplicas=3)
    assert condition(ps, "Ready")["status"] == "True", ps["status"]


def _revisions(cluster: Cluster, namespace: str, name: str) -> dict[str, dict[str, Any]]:
    """``kubectl get controllerrevisions -l apps.opsuite.dev/podset=NAME``, by name."""
    listed = cluster.kubectl(
        "get", "controllerrevisions", "-n", namespace, "-l", f"{NAME_LABEL}={name}", "-o", "json"
    )
    return {r["metadata"]["name"]: r for r in json.loads(listed)["items"]}


def _rolled_out(podsets: PodSets, name: str, selector: str, replicas: int) -> dict[str, Any]:
    """Every pod from the current template, Running and Ready; then the settled status."""
    podsets.wait_status(name, replicas=replicas, updatedReplicas=replicas, timeout=180)
    _running_and_ready(podsets, selector, replicas)
    return podsets.wait_status(
        name, replicas=replicas, updatedReplicas=replicas, availableReplicas=replicas
    )


def _wait_available(cluster: Cluster, namespace: str, name: str) -> None:
    """``kubectl wait --for=condition=Available pset/NAME`` as docs/podset.md shows it."""
    cluster.kubectl(
        "wait", "--for=condition=Available", f"pset/{name}", "-n", namespace, "--timeout=120s"
    )


def _update_to(
    cluster: Cluster, podsets: PodSets, namespace: str, name: str, selector: str, version: str
) -> tuple[str, dict[str, Any]]:
    """A new template (annotation ``version``) rolled out: its revision and template."""
    _patch(
        cluster,
        namespace,
        name,
        {"spec": {"template": {"metadata": {"annotations": {"version": version}}}}},
    )
    ps = _rolled_out(podsets, name, selector, 2)
    _wait_available(cluster, namespace, name)
    assert ps["status"]["currentRevision"] == ps["status"]["updateRevision"], ps["status"]
    return ps["status"]["updateRevision"], ps["spec"]["template"]


def test_templates_are_kept_as_revisions_and_a_rollback_runs_the_earlier_template(
    cluster: Cluster,
    api: client.ApiClient,
    podset_op: OperatorHandle,
    podsets: PodSets,
    namespace: str,
) -> None:
    """Three templates with revisionHistoryLimit 1: each kept as a ControllerRevision owned by
    the PodSet, the oldest trimmed; copying revision 2's template back into the spec (the
    documented kubectl command) rolls the pods back to it on the real node, and that revision
    becomes the newest. kubectl wait --for=condition=Available returns after each rollout."""
    name, selector = "hist", "app=hist"
    created = podsets.create(
        _real_podset(api, name, 2, updateStrategy=STRATEGY, revisionHistoryLimit=1)
    )
    uid = created["metadata"]["uid"]
    ps = _rolled_out(podsets, name, selector, 2)
    _wait_available(cluster, namespace, name)
    first = ps["status"]["updateRevision"]
    assert ps["status"]["currentRevision"] == first
    revisions = wait_until(
        lambda: _revisions(cluster, namespace, name),
        lambda r: first in r,
        timeout=60,
        what="revision 1",
    )
    kept = revisions[first]
    assert kept["revision"] == 1
    assert kept["data"]["template"] == ps["spec"]["template"]
    assert [
        (r["kind"], r["uid"], r["controller"]) for r in kept["metadata"]["ownerReferences"]
    ] == [("PodSet", uid, True)]

    second, second_template = _update_to(cluster, podsets, namespace, name, selector, "2")
    third, _ = _update_to(cluster, podsets, namespace, name, selector, "3")
    # revisionHistoryLimit 1: revision 1 is trimmed, revision 2 kept beside the current one.
    revisions = wait_until(
        lambda: _revisions(cluster, namespace, name),
        lambda r: set(r) == {second, third},
        timeout=60,
        what="revisions 2 and 3 only",
    )
    assert (revisions[second]["revision"], revisions[third]["revision"]) == (2, 3)

    # Back to revision 2, as docs/podset.md shows: its template copied into the spec.
    template = cluster.kubectl(
        "get", "controllerrevision", second, "-n", namespace, "-o", "jsonpath={.data.template}"
    )
    replace = f'[{{"op": "replace", "path": "/spec/template", "value": {template}}}]'
    cluster.kubectl("patch", f"pset/{name}", "-n", namespace, "--type=json", "-p", replace)
    ps = _rolled_out(podsets, name, selector, 2)
    assert ps["spec"]["template"] == second_template
    assert ps["status"]["updateRevision"] == second
    _wait_available(cluster, namespace, name)
    pods = podsets.active_pods(selector)
    assert {p.metadata.annotations.get("version") for p in pods} == {"2"}
    revisions = wait_until(
        lambda: _revisions(cluster, namespace, name),
        lambda r: second in r and r[second]["revision"] == 4,
        timeout=60,
        what="revision 2 renumbered 4, the newest",
    )
    assert set(revisions) == {second, third}
    assert podsets.get(name)["status"]["currentRevision"] == second


def test_a_revision_someone_else_made_under_the_name_is_never_used_nor_touched(
    cluster: Cluster,
    api: client.ApiClient,
    podset_op: OperatorHandle,
    podsets: PodSets,
    namespace: str,
) -> None:
    """A ControllerRevision crafted under the name the PodSet's template would get, holding
    another template: the PodSet's pods still run its own spec's template, the crafted
    revision is left as it was, and Degraded says FailedRevision naming it; once it is
    deleted, the operator keeps its own and Degraded clears."""
    name, selector = "crafted", "app=crafted"
    body = _real_podset(api, name, 1, updateStrategy=STRATEGY)
    stored = podsets.custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body, dry_run="All"
    )
    revision_name = f"{name}-{template_hash(stored['spec']['template'])}"
    crafted_template = copy.deepcopy(stored["spec"]["template"])
    crafted_template["metadata"]["annotations"] = {"crafted": "yes"}
    crafted = {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": revision_name, "labels": {NAME_LABEL: name}},
        "data": {"template": crafted_template},
        "revision": 99,
    }
    apps = client.AppsV1Api(api)
    apps.create_namespaced_controller_revision(namespace, crafted)
    podsets.create(body)
    (pod,) = _running_and_ready(podsets, selector, 1)
    assert "crafted" not in (pod.metadata.annotations or {})
    ps = wait_until(
        lambda: podsets.get(name),
        lambda o: condition(o, "Degraded").get("reason") == "FailedRevision",
        timeout=60,
        what="Degraded FailedRevision",
    )
    assert revision_name in condition(ps, "Degraded")["message"], ps["status"]
    left = apps.read_namespaced_controller_revision(revision_name, namespace)
    assert (left.revision, left.metadata.owner_references) == (99, None)

    apps.delete_namespaced_controller_revision(revision_name, namespace)
    ps = wait_until(
        lambda: podsets.get(name),
        lambda o: condition(o, "Degraded").get("status") == "False",
        timeout=120,
        what="Degraded False once the name is free",
    )
    own = apps.read_namespaced_controller_revision(revision_name, namespace)
    assert [r.uid for r in own.metadata.owner_references] == [ps["metadata"]["uid"]]
    assert own.data["template"] == stored["spec"]["template"]
