"""What the operators' e2e support modules share: a custom resource's identity and CRD, access to
its objects, and a test run's pool of namespaces."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.cluster import Cluster, condition, wait_observed, wait_until
from e2e.operators import OperatorHandle, operator_handle, start_operator

P = TypeVar("P", bound="NamespacePool")


@dataclass(frozen=True)
class CustomResource:
    """One custom resource type and the directory of its generated CRD."""

    group: str
    version: str
    kind: str
    plural: str
    crd_dir: Path

    def install_crd(self, cluster: Cluster) -> None:
        """Apply the generated CRD and wait until it is served."""
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(self.crd_dir))
        cluster.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{self.plural}.{self.group}",
        )

    def manifest(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """An object of this resource named ``name`` with ``spec``."""
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }


class CustomObjects:
    """Namespaced objects of one custom resource; remembers those it created for clean-up (at
    the end of a ``with`` block)."""

    def __init__(self, api: client.ApiClient, resource: CustomResource) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.resource = resource
        self.created: list[tuple[str, str]] = []

    def _path(self, namespace: str) -> tuple[str, str, str, str]:
        return self.resource.group, self.resource.version, namespace, self.resource.plural

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(
            *self._path(namespace), body
        )
        self.created.append((namespace, body["metadata"]["name"]))
        return result

    def try_create_as(
        self, api: client.ApiClient, namespace: str, body: dict[str, Any]
    ) -> tuple[int, str]:
        """Create ``body`` with ``api``'s credentials (a tenant's): the refusal's status and
        body, or 201 once what was admitted is deleted again (by this client), so that an
        admission policy the API server had not loaded yet can be tried again."""
        try:
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                *self._path(namespace), body
            )
        except ApiException as exc:
            return exc.status, exc.body or ""
        self.delete(namespace, body["metadata"]["name"], wait=True)
        return 201, ""

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            *self._path(namespace), name
        )
        return result

    def patch(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.patch_namespaced_custom_object(
            *self._path(namespace), name, patch
        )
        return result

    def delete(self, namespace: str, name: str, *, wait: bool = False) -> None:
        """Delete an object (gone already is fine); with ``wait``, until it is gone."""
        try:
            self.custom.delete_namespaced_custom_object(*self._path(namespace), name)
        except ApiException as exc:
            if exc.status != 404:
                raise
        if wait:
            wait_until(
                lambda: self.exists(namespace, name),
                lambda present: not present,
                timeout=60,
                what=f"{self.resource.kind} {namespace}/{name} gone",
            )

    def exists(self, namespace: str, name: str) -> bool:
        try:
            self.get(namespace, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def wait(
        self,
        namespace: str,
        name: str,
        done: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """Wait until the object satisfies ``done`` with a status of its current generation."""
        return wait_observed(
            lambda: self.get(namespace, name), done, what=f"{name}: {what}", timeout=timeout
        )

    def wait_ready_with(
        self, namespace: str, name: str, field: str, value: Any, timeout: float
    ) -> dict[str, Any]:
        """Wait for Ready=True with ``status.<field> == value``."""
        return self.wait(
            namespace,
            name,
            lambda o: (
                condition(o, "Ready").get("status") == "True" and o["status"].get(field) == value
            ),
            f"Ready with {field}={value}",
            timeout,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.cleanup()

    def cleanup(self, *, wait: bool = False) -> None:
        """Delete every object created here; with ``wait``, until all are gone."""
        for namespace, name in reversed(self.created):
            self.delete(namespace, name)
        if wait:
            for namespace, name in self.created:
                self.delete(namespace, name, wait=True)


class NamespacePool:
    """The namespaces of one test run: ``name("a")`` is ``<prefix>-<run>-a``; the operator the
    run starts serves exactly those, and its User-Agent carries ``identity``. A ``with`` block
    applies the CRD of :attr:`RESOURCE`, creates the namespaces of :attr:`CREATED_UP_FRONT`
    (ready once their default ServiceAccount is) and deletes all of them, those the tests
    created included, when it ends."""

    RESOURCE: ClassVar[CustomResource]

    PREFIX: str
    SUFFIXES: tuple[str, ...]
    CREATED_UP_FRONT: tuple[str, ...]
    LABELS: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    """The labels of the namespaces created up front, by suffix."""
    COMMAND: str
    """The operator the pool's tests run."""
    FLAGS: tuple[str, ...] = ()
    """Its flags beside ``--namespace``."""

    def __init__(self, cluster: Cluster, api: client.ApiClient) -> None:
        self.cluster = cluster
        self.core = client.CoreV1Api(api)
        self.run = uuid.uuid4().hex[:6]
        self.identity = f"{self.PREFIX}-e2e-{self.run}"

    def __enter__(self) -> Self:
        self.RESOURCE.install_crd(self.cluster)
        for suffix in self.CREATED_UP_FRONT:
            self.core.create_namespace(self.namespace(suffix, self.LABELS.get(suffix, {})))
        for suffix in self.CREATED_UP_FRONT:
            wait_until(
                lambda s=suffix: self.core.read_namespaced_service_account("default", self.name(s)),
                lambda sa: sa is not None,
                timeout=60,
                what="default ServiceAccount",
            )
        return self

    def __exit__(self, *_exc: object) -> None:
        for name in self.all():
            try:
                self.core.delete_namespace(name, propagation_policy="Background")
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def annotations(self) -> dict[str, str]:
        """The annotations of every namespace of the pool (none by default)."""
        return {}

    def namespace(self, suffix: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The Namespace ``name(suffix)`` as the pool creates it, with ``labels``."""
        metadata = {"name": self.name(suffix), "labels": dict(labels or {})}
        return {"metadata": {**metadata, "annotations": self.annotations()}}

    def name(self, suffix: str) -> str:
        assert suffix in self.SUFFIXES, suffix
        return f"{self.PREFIX}-{self.run}-{suffix}"

    def all(self) -> list[str]:
        return [self.name(s) for s in self.SUFFIXES]

    def operator(self, log_dir: Path) -> OperatorHandle:
        """The operator for the pool's tests: a ready process serving exactly the pool's
        namespaces with :attr:`FLAGS`, or the one in the cluster (e2e.operators)."""
        return operator_handle(
            self.cluster,
            self.COMMAND,
            lambda: start_operator(
                self.cluster, self.COMMAND, self.all(), log_dir, *self.FLAGS, POD_NAME=self.identity
            ),
        )


def pool_fixture(pool_type: type[P]) -> Any:
    """A test module's ``pool`` fixture (``pool = pool_fixture(Pool)``): the namespaces of a
    ``pool_type``, its CRD applied, for the whole module."""

    @pytest.fixture(scope="module", name="pool")
    def fixture(cluster: Cluster, api: client.ApiClient) -> Iterator[P]:
        with pool_type(cluster, api) as pool:
            yield pool

    return fixture
