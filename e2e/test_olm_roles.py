"""What OLM installs, on the OLM route (``hack/e2e-olm.sh test`` sets E2E_OLM): the operators'
images by digest, and what OLM grants on the operators' own resources.

The bundles' CSVs name each operator image by the digest the registry serves (pinned when the
release, or ``hack/olm_images.py`` here, builds the bundle images), so OLM runs exactly what was
published (#31, item 9).

For every CRD a bundle owns OLM makes ClusterRoles aggregated into the built-in ``edit`` and
``admin``, so a cluster-wide ``edit`` binding may write DebugImagePolicies, the cluster-wide
image allowlist (#31, item 8). The ``debugimagepolicy-writers`` policy, which the admin's step
of docs/poddebugger.md applies with the others, refuses such an editor all the same.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.charts import CHARTS
from e2e.cluster import service_account_client
from poddebugger_manifests import IMAGE_POLICY_WRITERS_NAME, IMAGE_POLICY_WRITERS_VERB
from poddebugger_operator.models import GROUP, IMAGE_POLICY_KIND, IMAGE_POLICY_PLURAL, VERSION

pytestmark = [
    pytest.mark.olm,
    pytest.mark.skipif(
        not os.environ.get("E2E_OLM"), reason="checks what OLM installs: hack/e2e-olm.sh test"
    ),
]

OLM_EDIT_ROLE = f"{IMAGE_POLICY_PLURAL}.{GROUP}-{VERSION}-edit"


@pytest.fixture
def cluster_editor(api: client.ApiClient) -> Iterator[client.ApiClient]:
    """A ServiceAccount bound to the built-in ``edit`` cluster-wide."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    name = f"olm-editor-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "editor"}})
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "edit",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": name}],
            }
        )
        yield service_account_client(api, name, "editor")
    finally:
        try:
            rbac.delete_cluster_role_binding(name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        core.delete_namespace(name, propagation_policy="Background")


def test_olm_edit_may_write_debug_image_policies_but_the_writers_policy_refuses(
    api: client.ApiClient, cluster_editor: client.ApiClient
) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = rbac.read_cluster_role(OLM_EDIT_ROLE)
    assert role.metadata.labels.get("rbac.authorization.k8s.io/aggregate-to-edit") == "true"
    client.AdmissionregistrationV1Api(api).read_validating_admission_policy(
        IMAGE_POLICY_WRITERS_NAME
    )
    review = client.AuthorizationV1Api(cluster_editor).create_self_subject_access_review(
        {
            "spec": {
                "resourceAttributes": {
                    "group": GROUP,
                    "resource": IMAGE_POLICY_PLURAL,
                    "verb": "create",
                }
            }
        }
    )
    assert review.status.allowed, "OLM's aggregated edit role no longer grants create"
    name = f"olm-editor-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": IMAGE_POLICY_KIND,
        "metadata": {"name": name},
        "spec": {"allowedPrefixes": []},
    }
    custom = client.CustomObjectsApi(cluster_editor)

    def attempt() -> ApiException | None:
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, IMAGE_POLICY_PLURAL, body)
        except ApiException as exc:
            return exc
        client.CustomObjectsApi(api).delete_cluster_custom_object(
            GROUP, VERSION, IMAGE_POLICY_PLURAL, name
        )
        return None

    refusal = attempt()
    assert refusal is not None, "a cluster-wide editor created a DebugImagePolicy"
    assert refusal.status == 403, refusal
    assert IMAGE_POLICY_WRITERS_VERB in str(refusal.body), refusal.body


def test_olm_runs_the_operators_by_digest(api: client.ApiClient) -> None:
    namespace = os.environ.get("E2E_NAMESPACE", "operators")
    apps = client.AppsV1Api(api)
    for spec in CHARTS.values():
        deployment = apps.read_namespaced_deployment(spec.name, namespace)
        (container,) = deployment.spec.template.spec.containers
        repository, _, digest = container.image.partition("@")
        assert repository == f"ghcr.io/opsuite/{spec.name}", container.image
        assert digest.startswith("sha256:"), container.image
