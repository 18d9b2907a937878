"""Test support for the operators' property tests (imports hypothesis, a dev dependency).

- :func:`from_schema`: a hypothesis strategy for values a CRD's structural schema admits
  (types, enums, patterns, lengths, bounds, required fields, list-map keys; not CEL rules,
  so the planners also see specs that only the CEL rules would have refused).
- :func:`schema_errors`: what the API server's OpenAPI validation would refuse in a value, for
  the subset of OpenAPI v3 the generated CRDs use; unknown fields count as errors (the API
  server would prune them, losing what the operator meant to write).
- Checks of Kubernetes names, label keys and values, as apimachinery's validation does them.
- :class:`FakeClock`: a monotonic clock the test moves by hand.
- :func:`offline_manager`: a Manager whose API client points nowhere, for wiring tests, and
  :class:`WiredOperator`, which feeds its watch routes and records what its controller enqueues.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from opsuite_common.kube_model import LABEL_VALUE_PATTERN, QUALIFIED_NAME_PATTERN
from opsuite_common.manager import Manager
from opsuite_common.options import ManagerOptions
from opsuite_common.store import JSON, ObjectKey

Schema = Mapping[str, Any]


class FakeClock:
    """A stand-in for ``time.monotonic``: returns ``now``, which the test sets."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_PATTERN)
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)
MAX_ITEMS = 4
"""Longest list or map generated (larger bounds are still checked by schema_errors)."""
MAX_TEXT = 40
"""Longest unconstrained string generated, unless the schema asks for more."""


def is_dns_label(name: str) -> bool:
    """A valid RFC 1123 label (namespace, container name): at most 63 characters."""
    return len(name) <= 63 and DNS_LABEL.fullmatch(name) is not None


def is_dns_subdomain(name: str) -> bool:
    """A valid RFC 1123 subdomain (most object names): at most 253 characters."""
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


def is_qualified_name(key: str) -> bool:
    """A valid label or annotation key: ``[prefix/]name``, prefix a subdomain, name ≤ 63."""
    prefix, _, name = key.rpartition("/")
    return (
        _QUALIFIED_NAME.fullmatch(key) is not None
        and len(name) <= 63
        and (not prefix or is_dns_subdomain(prefix))
    )


def is_label_value(value: str) -> bool:
    """A valid label value: at most 63 characters, alphanumeric at both ends."""
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


LABELS = st.dictionaries(
    st.from_regex(QUALIFIED_NAME_PATTERN, fullmatch=True).filter(is_qualified_name),
    st.from_regex(LABEL_VALUE_PATTERN, fullmatch=True).filter(is_label_value),
    min_size=1,
    max_size=MAX_ITEMS,
)
"""Non-empty maps of valid labels."""


def label_errors(labels: Mapping[str, str]) -> list[str]:
    """The invalid entries of a label map."""
    return [
        f"label {k!r}={v!r}"
        for k, v in labels.items()
        if not (is_qualified_name(k) and is_label_value(v))
    ]


def _text(schema: Schema) -> st.SearchStrategy[str]:
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", 10**6))
    if "pattern" in schema:
        base = st.from_regex(str(schema["pattern"]), fullmatch=True)
    else:
        base = st.text(min_size=low, max_size=max(low, min(high, MAX_TEXT)))
    return base.filter(lambda s: low <= len(s) <= high)


def _object(schema: Schema) -> st.SearchStrategy[dict[str, Any]]:
    properties: Mapping[str, Schema] = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: from_schema(v) for k, v in properties.items() if k in required},
            optional={k: from_schema(v) for k, v in properties.items() if k not in required},
        )
    values = schema.get("additionalProperties")
    if isinstance(values, Mapping):
        keys = st.from_regex(QUALIFIED_NAME_PATTERN, fullmatch=True) | st.text(max_size=12)
        size = min(int(schema.get("maxProperties", MAX_ITEMS)), MAX_ITEMS)
        return st.dictionaries(keys, from_schema(values), max_size=size)
    # Opaque (x-kubernetes-preserve-unknown-fields): small JSON objects.
    scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=8)
    return st.dictionaries(st.text(max_size=8), scalars, max_size=3)


def from_schema(schema: Schema) -> st.SearchStrategy[Any]:
    """Values that ``schema`` admits (CEL rules aside); lists and maps kept small."""
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    if schema.get("x-kubernetes-int-or-string"):
        return st.integers(-2, 120) | st.from_regex(r"-?[0-9]{1,3}%?", fullmatch=True) | _text({})
    kind = schema.get("type")
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(schema.get("minimum", -(2**31)), schema.get("maximum", 2**31 - 1))
    if kind == "string":
        return _text(schema)
    if kind == "array":
        low = int(schema.get("minItems", 0))
        high = max(low, min(int(schema.get("maxItems", MAX_ITEMS)), MAX_ITEMS))
        keys = schema.get("x-kubernetes-list-map-keys")
        unique: Any = None
        if keys:
            unique = lambda item: tuple(item.get(k) for k in keys)  # noqa: E731
        elif schema.get("x-kubernetes-list-type") == "set":
            unique = lambda item: item  # noqa: E731
        items = from_schema(schema.get("items", {}))
        return st.lists(items, min_size=low, max_size=high, unique_by=unique)
    return _object(schema)


def _type_ok(value: Any, kind: str | None) -> bool:
    checks: dict[str | None, bool] = {
        "object": isinstance(value, Mapping),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "boolean": isinstance(value, bool),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        None: True,
    }
    return checks.get(kind, False)


def schema_errors(value: Any, schema: Schema, path: str = "") -> list[str]:
    """Why the API server would refuse (or prune part of) ``value`` under ``schema``."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null"]
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: not an integer or string"]
        return []
    kind = schema.get("type")
    if not _type_ok(value, kind):
        return [f"{path}: {value!r} is not of type {kind}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        errors += _string_errors(value, schema, path)
    elif isinstance(value, int) and not isinstance(value, bool):
        if value < schema.get("minimum", value) or value > schema.get("maximum", value):
            errors.append(f"{path}: {value} out of bounds")
    elif isinstance(value, list):
        errors += _array_errors(value, schema, path)
    elif isinstance(value, Mapping):
        errors += _object_errors(value, schema, path)
    return errors


def _string_errors(value: str, schema: Schema, path: str) -> list[str]:
    errors = []
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        errors.append(f"{path}: length {len(value)} out of bounds")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    return errors


def _array_errors(value: Sequence[Any], schema: Schema, path: str) -> list[str]:
    errors = []
    if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        errors.append(f"{path}: {len(value)} items out of bounds")
    keys = schema.get("x-kubernetes-list-map-keys")
    if keys:
        identities = [tuple(item.get(k) for k in keys) for item in value]
        if len(set(identities)) != len(identities):
            errors.append(f"{path}: duplicate list-map keys {keys}")
    items = schema.get("items", {})
    for index, item in enumerate(value):
        errors += schema_errors(item, items, f"{path}[{index}]")
    return errors


def _object_errors(value: Mapping[str, Any], schema: Schema, path: str) -> list[str]:
    properties: Mapping[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    errors = [f"{path}.{k}: required" for k in schema.get("required", ()) if k not in value]
    if len(value) > schema.get("maxProperties", len(value)):
        errors.append(f"{path}: {len(value)} properties, at most {schema['maxProperties']}")
    for key, item in value.items():
        if key in properties:
            errors += schema_errors(item, properties[key], f"{path}.{key}")
        elif isinstance(extra, Mapping):
            errors += schema_errors(item, extra, f"{path}.{key}")
        elif not (extra is True or schema.get("x-kubernetes-preserve-unknown-fields")):
            errors.append(f"{path}.{key}: unknown field (pruned)")
    return errors


def offline_manager(
    name: str,
    namespaces: tuple[str, ...],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    clock: Callable[[], float] = time.monotonic,
    watch_timeout: float = 60,
    **options: Any,
) -> Manager:
    """A Manager serving ``namespaces`` whose API client points at a closed port (nothing is
    sent unless a test makes it), for tests of the wiring between watches and controllers;
    ``clock`` measures its watches' silence; ``options`` are ManagerOptions fields to set."""
    kubeconfig = tmp_path / "kubeconfig"
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    kubeconfig.write_text(json.dumps(config))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    defaults: dict[str, Any] = {
        "leader_elect": False,
        "leader_election_id": "test",
        "leader_election_namespace": None,
        "metrics_bind_address": "0",
        "health_probe_bind_address": "0",
        "log_format": "text",
        "log_level": "info",
        "max_concurrent_reconciles": 1,
    }
    settings = defaults | options
    return Manager(
        name,
        ManagerOptions(namespaces=namespaces, watch_timeout=watch_timeout, **settings),
        clock=clock,
    )


class WiredOperator:
    """An operator wired onto an offline manager: :meth:`event` delivers a watch event as the
    manager's route would, and every key the controller enqueues is recorded (the one named
    ``controller_name``, when the operator has several)."""

    def __init__(self, manager: Manager, controller_name: str | None = None) -> None:
        self.manager = manager
        self.enqueued: list[ObjectKey] = []
        (controller,) = [c for c in manager.controllers if controller_name in (None, c.name)]
        self.controller = controller
        """The controller whose enqueues are recorded."""

        def enqueue(key: ObjectKey, *, after: float = 0.0) -> None:
            self.enqueued.append(key)

        controller.enqueue = enqueue  # type: ignore[method-assign]

    def event(self, group: str, plural: str, event_type: str | None, obj: JSON) -> None:
        """Deliver ``{"type": event_type, "object": obj}`` (type None: part of a listing)."""
        deliver = self.manager.route(group, plural)
        assert deliver is not None, f"{plural}.{group}: not watched"
        deliver({"type": event_type, "object": obj})

    def cached(self, plural: str, namespace: str, name: str) -> JSON | None:
        """The record the manager's pruned cache of ``plural`` holds for an object."""
        store = self.manager.cache(plural)
        assert store is not None, f"{plural}: no store the manager prunes"
        return store.get(namespace, name)
