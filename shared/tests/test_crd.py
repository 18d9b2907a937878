"""Tests for opsuite_packaging.crd: structural schemas, instance validity, CRD rendering."""

from __future__ import annotations

import re
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from types import ModuleType
from typing import Any, Literal

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import AnyUrl, ConfigDict, Field

from opsuite_common.kube_model import (
    Condition,
    ConditionList,
    KubeModel,
    LabelSelector,
    LabelSelectorRequirement,
    PodTemplateSpec,
    TemplateMetadata,
    cel,
    list_map,
    validations,
)
from opsuite_packaging.crd import (
    CrdDescriptor,
    PrinterColumn,
    ScaleSubresource,
    build_crd,
    condition_column,
    crd_yaml,
    structural_schema,
)

# --------------------------------------------------------------------------------------------
# A small structural-schema checker and validator for the subset of OpenAPI v3 we emit.
# The rules mirror k8s.io/apiextensions-apiserver (pkg/apis/apiextensions/validation and
# pkg/apiserver/schema/validation.go).
# --------------------------------------------------------------------------------------------

Schema = dict[str, Any]
PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
SCALARS = {"string", "integer", "number", "boolean"}
ALLOWED_KEYS = {
    *("type", "description", "default", "enum", "format", "pattern", "minLength", "maxLength"),
    *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    *("items", "minItems", "maxItems", "properties", "required", "additionalProperties"),
    *("minProperties", "maxProperties", "anyOf", PRESERVE, INT_OR_STRING),
    *("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type"),
    "x-kubernetes-validations",
}
ROOT_KEYS = {"type", "description", "properties", "required", "x-kubernetes-validations"}
FORMATS = {"date-time", "date", "uri", "email", "uuid", "ipv4", "ipv6", "byte", "password"}
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\Z")


def assert_structural(schema: Schema, path: str = "", *, root: bool = True) -> None:
    """Fail unless ``schema`` is a structural schema the API server accepts."""
    assert set(schema) <= (ROOT_KEYS if root else ALLOWED_KEYS), (path, set(schema))
    if root:
        assert schema["type"] == "object"
        assert schema["properties"].get("metadata", {"type": "object"}) == {"type": "object"}
    typ = schema.get("type")
    if typ is None:
        assert schema.get(INT_OR_STRING) or schema.get(PRESERVE), f"{path}: no type"
    else:
        assert typ in TYPES, path
    if "anyOf" in schema:
        assert schema.get(INT_OR_STRING), path
        assert schema["anyOf"] == INT_OR_STRING_ANY_OF, path
    assert not (schema.get(INT_OR_STRING) and schema.get(PRESERVE)), path
    for flag in ("exclusiveMinimum", "exclusiveMaximum"):
        if flag in schema:
            assert schema[flag] is True, path
            assert flag.replace("exclusiveM", "m") in schema, path
    if "format" in schema:
        assert schema["format"] in FORMATS, path
    if "pattern" in schema:
        assert not re.search(r"\(\?[=!<]|\\[1-9]|\\Z", schema["pattern"]), path
        re.compile(schema["pattern"])
    if typ == "array":
        assert isinstance(schema.get("items"), dict), f"{path}: array without items"
    if "additionalProperties" in schema:
        assert typ == "object", path
        assert "properties" not in schema, path
        assert isinstance(schema["additionalProperties"], dict), path
    assert set(schema.get("required", ())) <= set(schema.get("properties", {})), path
    _assert_extensions(schema, path)
    for rule in schema.get("x-kubernetes-validations", ()):
        assert set(rule) <= {"rule", "message", "fieldPath", "reason"}, path
        assert rule["rule"], path
        assert rule["message"], path
        assert "\n" not in rule["message"], path
    if "default" in schema:
        assert not root
        assert validate(schema["default"], schema) == [], f"{path}: invalid default"
    for name, sub in schema.get("properties", {}).items():
        assert_structural(sub, f"{path}.{name}", root=False)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            assert_structural(schema[key], path + suffix, root=False)


def _assert_extensions(schema: Schema, path: str) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if "x-kubernetes-map-type" in schema:
        assert schema["type"] == "object", path
        assert schema["x-kubernetes-map-type"] in ("atomic", "granular"), path
    if list_type is None:
        assert "x-kubernetes-list-map-keys" not in schema, path
        return
    assert schema["type"] == "array", path
    assert list_type in ("atomic", "set", "map"), path
    items = schema["items"]
    if list_type == "set":
        assert items.get("type") in SCALARS, path
    if list_type == "map":
        keys = schema["x-kubernetes-list-map-keys"]
        assert keys, path
        assert len(set(keys)) == len(keys), path
        assert items["type"] == "object", path
        for key in keys:
            assert items["properties"][key]["type"] in SCALARS, path
            assert key in items.get("required", ()) or "default" in items["properties"][key]


def validate(value: Any, schema: Schema, path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema``, including fields pruning would drop."""
    if schema.get(INT_OR_STRING):
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return [] if ok else [f"{path}: not int-or-string"]
    if "type" not in schema:
        return [] if schema.get(PRESERVE) else [f"{path}: untyped"]
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    if not checks[schema["type"]](value):
        return [f"{path}: {value!r} is not {schema['type']}"]
    errors = [f"{path}: {value!r} not in enum"] if value not in schema.get("enum", [value]) else []
    if schema["type"] in ("integer", "number"):
        errors += _numeric(value, schema, path)
    elif schema["type"] == "string":
        errors += _string(value, schema, path)
    elif schema["type"] == "array":
        errors += _array(value, schema, path)
    elif schema["type"] == "object":
        errors += _object(value, schema, path)
    return errors


def _numeric(value: float, schema: Schema, path: str) -> list[str]:
    errors = []
    if "minimum" in schema and (
        value < schema["minimum"] or (schema.get("exclusiveMinimum") and value == schema["minimum"])
    ):
        errors.append(f"{path}: below minimum")
    if "maximum" in schema and (
        value > schema["maximum"] or (schema.get("exclusiveMaximum") and value == schema["maximum"])
    ):
        errors.append(f"{path}: above maximum")
    return errors


def _string(value: str, schema: Schema, path: str) -> list[str]:
    errors = []
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value)):
        errors.append(f"{path}: bad length")
    pattern = schema.get("pattern")
    if pattern is not None and not re.search(re.sub(r"\$$", r"\\Z", pattern), value):
        errors.append(f"{path}: {value!r} does not match {pattern}")
    if schema.get("format") == "date-time" and not RFC3339.match(value):
        errors.append(f"{path}: not a date-time")
    return errors


def _array(value: list[Any], schema: Schema, path: str) -> list[str]:
    errors = []
    if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
        errors.append(f"{path}: bad item count")
    if schema.get("x-kubernetes-list-type") == "set" and len(set(value)) != len(value):
        errors.append(f"{path}: duplicate set items")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = [tuple(i.get(k) for k in schema["x-kubernetes-list-map-keys"]) for i in value]
        if len(set(keys)) != len(keys):
            errors.append(f"{path}: duplicate map keys")
    for index, item in enumerate(value):
        errors += validate(item, schema["items"], f"{path}[{index}]")
    return errors


def _object(value: dict[str, Any], schema: Schema, path: str) -> list[str]:
    errors = []
    if not schema.get("minProperties", 0) <= len(value) <= schema.get("maxProperties", len(value)):
        errors.append(f"{path}: bad property count")
    errors += [f"{path}.{k}: required" for k in schema.get("required", ()) if k not in value]
    properties = schema.get("properties", {})
    for key, item in value.items():
        if key in properties:
            errors += validate(item, properties[key], f"{path}.{key}")
        elif "additionalProperties" in schema:
            errors += validate(item, schema["additionalProperties"], f"{path}.{key}")
        elif not schema.get(PRESERVE):
            errors.append(f"{path}.{key}: unknown field, would be pruned")
    return errors


# --------------------------------------------------------------------------------------------
# Sample models covering every construct the converter supports.
# --------------------------------------------------------------------------------------------


class Mode(StrEnum):
    """Rollout mode."""

    FAST = "Fast"
    SAFE = "Safe"


class Port(KubeModel):
    """A named port."""

    name: str = Field(min_length=1, max_length=15, pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    """Port name, unique in the list."""
    port: int = Field(ge=1, le=65535)
    target: int | str | None = None
    """Target port number or name."""
    protocol: Literal["TCP", "UDP"] = "TCP"


class Resources(KubeModel):
    """Resource amounts."""

    cpu: int | str = "100m"
    memory: str | None = None


class SampleSpec(KubeModel):
    """Sample spec."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("self.minReplicas <= self.maxReplicas", "minReplicas must not exceed maxReplicas")
        )
    )

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(10, gt=0, le=1000)
    """Upper bound of replicas."""
    ratio: float = Field(0.5, ge=0, lt=1)
    mode: Mode = Mode.SAFE
    ports: list[Port] = Field(
        default_factory=list,
        max_length=8,
        json_schema_extra={
            **list_map("name"),
            **validations(cel("self.all(p, p.port != 22)", "port 22 is reserved")),
        },
    )
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] | None = None
    resources: Resources = Resources(memory=None)
    limits: Resources | None = Field(None, description="Hard limits.")
    tags: set[str] = Field(default_factory=set)
    selector: LabelSelector | None = None
    template: PodTemplateSpec | None = None
    extra: dict[str, Any] | None = None
    anything: Any = None
    weights: dict[str, int] = Field(default_factory=dict, max_length=5)
    fixed: Literal["fixed"] = "fixed"
    started: datetime | None = None
    url: AnyUrl | None = None


class SampleStatus(KubeModel):
    """Sample status."""

    replicas: int = Field(0, ge=0)
    selector: str | None = None
    observed_generation: int | None = None
    conditions: ConditionList = Field(default_factory=list)


DESCRIPTOR = CrdDescriptor(
    group="samples.opsuite.dev",
    version="v1alpha1",
    kind="Sample",
    plural="samples",
    description="A sample resource.",
    spec_model=SampleSpec,
    status_model=SampleStatus,
    short_names=("smp",),
    printer_columns=(
        PrinterColumn("Replicas", "integer", ".status.replicas", "Observed replicas"),
        PrinterColumn("Mode", "string", ".spec.mode", priority=1),
    ),
    scale=ScaleSubresource(".spec.maxReplicas", ".status.replicas", ".status.selector"),
    validations=(cel("self.metadata.name.size() <= 40", "name too long"),),
)

# --------------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------------

_NAMES = st.from_regex(r"[a-z]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True)
_LABEL_VALUES = st.from_regex(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,20})?[A-Za-z0-9])?", fullmatch=True)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_INT_OR_STRING = st.integers(min_value=0, max_value=10**6) | st.text(max_size=8)

_ports = st.builds(
    Port,
    name=_NAMES,
    port=st.integers(min_value=1, max_value=65535),
    target=st.none() | _INT_OR_STRING,
    protocol=st.sampled_from(["TCP", "UDP"]),
)
_resources = st.builds(Resources, cpu=_INT_OR_STRING, memory=st.none() | st.text(max_size=8))


@st.composite
def _requirements(draw: st.DrawFn) -> LabelSelectorRequirement:
    operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]))
    values = None
    if operator in ("In", "NotIn"):
        values = draw(st.lists(_LABEL_VALUES, min_size=1, max_size=3))
    return LabelSelectorRequirement(key=draw(_NAMES), operator=operator, values=values)


_selectors = st.builds(
    LabelSelector,
    match_labels=st.none() | st.dictionaries(_NAMES, _LABEL_VALUES, max_size=3),
    match_expressions=st.none() | st.lists(_requirements(), max_size=3),
)
_templates = st.builds(
    PodTemplateSpec,
    metadata=st.none()
    | st.builds(
        TemplateMetadata,
        labels=st.none() | st.dictionaries(_NAMES, _LABEL_VALUES, max_size=3),
        annotations=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
    ),
    spec=st.fixed_dictionaries(
        {
            "containers": st.lists(
                st.dictionaries(st.text(max_size=5), _JSON, max_size=2), min_size=1, max_size=2
            )
        },
        optional={"nodeName": st.text(max_size=5)},
    ),
)

_specs = st.builds(
    SampleSpec,
    min_replicas=st.integers(min_value=0, max_value=100),
    max_replicas=st.integers(min_value=1, max_value=1000),
    ratio=st.floats(min_value=0, max_value=1, exclude_max=True),
    mode=st.sampled_from(Mode),
    ports=st.lists(_ports, max_size=8, unique_by=lambda p: p.name),
    labels=st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
    annotations=st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5)),
    resources=_resources,
    limits=st.none() | _resources,
    tags=st.sets(st.text(max_size=5), max_size=4),
    selector=st.none() | _selectors,
    template=st.none() | _templates,
    extra=st.none() | st.dictionaries(st.text(max_size=5), _JSON, max_size=3),
    anything=_JSON,
    weights=st.dictionaries(st.text(max_size=5), st.integers(), max_size=5),
    started=st.none() | st.datetimes(timezones=st.just(UTC)),
    url=st.none() | st.sampled_from([AnyUrl("https://example.com/x"), AnyUrl("http://h:80")]),
)
_conditions = st.builds(
    Condition,
    type=st.sampled_from(["Ready", "example.com/Degraded", "Progressing"]),
    status=st.sampled_from(["True", "False", "Unknown"]),
    # pydantic's signature names parameters by alias; builds() fills unnamed required ones
    observedGeneration=st.none() | st.integers(min_value=0),
    lastTransitionTime=st.sampled_from(["2024-05-01T10:00:00Z", "2024-05-01T10:00:00.5+02:00"]),
    reason=st.from_regex(r"[A-Za-z]([A-Za-z0-9_,:]{0,10}[A-Za-z0-9_])?", fullmatch=True),
    message=st.text(max_size=20),
)
_statuses = st.builds(
    SampleStatus,
    replicas=st.integers(min_value=0, max_value=2**31 - 1),
    selector=st.none() | st.text(max_size=10),
    observed_generation=st.none() | st.integers(),
    conditions=st.lists(_conditions, max_size=3, unique_by=lambda c: c.type),
)

# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


def _root() -> Schema:
    schema: Schema = build_crd(DESCRIPTOR)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_generated_crd_schema_is_structural() -> None:
    assert_structural(_root())


@pytest.mark.parametrize(
    "model", [SampleSpec, SampleStatus, LabelSelector, PodTemplateSpec, Condition]
)
def test_model_schemas_are_structural(model: type[KubeModel]) -> None:
    assert_structural(structural_schema(model), model.__name__, root=False)


@settings(max_examples=60, deadline=None)
@given(_specs)
def test_spec_instances_validate_against_schema(spec: SampleSpec) -> None:
    data = spec.to_kube()
    assert validate(data, _root()["properties"]["spec"]) == []
    assert SampleSpec.model_validate(data) == spec


@settings(max_examples=60, deadline=None)
@given(_statuses)
def test_status_instances_validate_against_schema(status: SampleStatus) -> None:
    data = status.to_kube()
    assert validate(data, _root()["properties"]["status"]) == []
    assert SampleStatus.model_validate(data) == status


def test_whole_object_validates() -> None:
    obj = {
        "apiVersion": "samples.opsuite.dev/v1alpha1",
        "kind": "Sample",
        "metadata": {},
        "spec": SampleSpec().to_kube(),
    }
    assert validate(obj, _root()) == []
    assert _root().get("required") is None  # every spec field has a default


def test_schema_details() -> None:
    props = structural_schema(SampleSpec)["properties"]
    assert props["maxReplicas"] == {
        "default": 10,
        "description": "Upper bound of replicas.",
        "exclusiveMinimum": True,
        "minimum": 0,
        "maximum": 1000,
        "type": "integer",
    }
    assert props["ratio"]["maximum"] == 1
    assert props["ratio"]["exclusiveMaximum"] is True
    assert props["mode"] == {
        "default": "Safe",
        "description": "Rollout mode.",
        "enum": ["Fast", "Safe"],
        "type": "string",
    }
    assert props["fixed"] == {"default": "fixed", "enum": ["fixed"], "type": "string"}
    assert props["tags"] == {
        "items": {"type": "string"},
        "type": "array",
        "x-kubernetes-list-type": "set",
    }
    assert props["ports"]["x-kubernetes-list-type"] == "map"
    assert props["ports"]["x-kubernetes-list-map-keys"] == ["name"]
    assert props["ports"]["maxItems"] == 8
    port = props["ports"]["items"]["properties"]
    assert port["target"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "description": "Target port number or name.",
        "x-kubernetes-int-or-string": True,
    }
    assert props["resources"]["default"] == {"cpu": "100m"}
    assert props["limits"]["description"] == "Hard limits."
    assert props["extra"] == {"type": "object", PRESERVE: True}
    assert props["anything"] == {PRESERVE: True}
    assert props["weights"] == {  # default_factory values are not rendered
        "additionalProperties": {"type": "integer"},
        "maxProperties": 5,
        "type": "object",
    }
    assert props["started"] == {"format": "date-time", "type": "string"}
    assert props["url"]["format"] == "uri"
    assert props["selector"]["x-kubernetes-map-type"] == "atomic"
    spec = structural_schema(SampleSpec)
    assert spec["x-kubernetes-validations"][0]["rule"] == "self.minReplicas <= self.maxReplicas"
    assert "required" not in spec


def test_field_and_model_rules_are_merged() -> None:
    class Inner(KubeModel):
        model_config = ConfigDict(json_schema_extra=validations(cel("size(self) > 0", "a")))
        x: int = 0

    class Outer(KubeModel):
        inner: Inner | None = Field(None, json_schema_extra=validations(cel("true", "b")))

    rules = structural_schema(Outer)["properties"]["inner"]["x-kubernetes-validations"]
    assert [r["message"] for r in rules] == ["a", "b"]


def test_unknown_formats_are_dropped() -> None:
    class Formats(KubeModel):
        wait: timedelta = timedelta(seconds=1)
        blob: bytes = b""

    props = structural_schema(Formats)["properties"]
    assert "format" not in props["wait"]
    assert "format" not in props["blob"]


class _Recursive(KubeModel):
    children: list[_Recursive] = Field(default_factory=list)


class _Union(KubeModel):
    value: Port | Resources


class _NullableRequired(KubeModel):
    value: int | None


class _Tuple(KubeModel):
    value: tuple[int, str] = (1, "a")


class _BothBounds(KubeModel):
    value: int = Field(5, ge=1, gt=0)


class _ObjectSet(KubeModel):
    value: list[Port] = Field([], json_schema_extra={"x-kubernetes-list-type": "set"})


class _MissingKey(KubeModel):
    value: list[Port] = Field([], json_schema_extra=list_map("nope"))


class _OptionalKey(KubeModel):
    value: list[Port] = Field([], json_schema_extra=list_map("protocol", "target"))


class _ScalarMap(KubeModel):
    value: list[str] = Field([], json_schema_extra=list_map("name"))


class _MapTypeOnInt(KubeModel):
    value: int = Field(0, json_schema_extra={"x-kubernetes-map-type": "atomic"})


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_Recursive, "recursive"),
        (_Union, "unions"),
        (_NullableRequired, "required but nullable"),
        (_Tuple, "prefixItems"),
        (_BothBounds, "both minimum and exclusiveMinimum"),
        (_ObjectSet, "scalar items"),
        (_MissingKey, "scalar item property"),
        (_OptionalKey, "'target' must be a scalar"),
        (_ScalarMap, "scalar item property"),
        (_MapTypeOnInt, "map-type needs an object"),
    ],
)
def test_unsupported_constructs_raise(model: type[KubeModel], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        structural_schema(model)


def test_list_map_key_needs_required_or_default() -> None:
    class Item(KubeModel):
        key: str | None = None

    class Holder(KubeModel):
        items: list[Item] = Field([], json_schema_extra=list_map("key"))

    with pytest.raises(ValueError, match="required or defaulted"):
        structural_schema(Holder)


def test_build_crd_layout() -> None:
    """The singular name defaults to the kind in lower case, the categories to opsuite."""
    crd = build_crd(DESCRIPTOR)
    assert crd["metadata"] == {"name": "samples.samples.opsuite.dev"}
    spec = crd["spec"]
    assert spec["names"] == {
        "kind": "Sample",
        "listKind": "SampleList",
        "plural": "samples",
        "singular": "sample",
        "shortNames": ["smp"],
        "categories": ["opsuite"],
    }
    assert spec["scope"] == "Namespaced"
    (version,) = spec["versions"]
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.maxReplicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert version["additionalPrinterColumns"] == [
        {
            "name": "Replicas",
            "type": "integer",
            "jsonPath": ".status.replicas",
            "description": "Observed replicas",
        },
        {"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    root = version["schema"]["openAPIV3Schema"]
    assert root["x-kubernetes-validations"] == [
        {"rule": "self.metadata.name.size() <= 40", "message": "name too long"}
    ]
    assert set(root["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}


def test_spec_is_required_when_it_has_required_fields() -> None:
    crd = build_crd(
        CrdDescriptor(
            group="x.opsuite.dev",
            version="v1",
            kind="Port",
            plural="ports",
            singular="portable",
            description="d",
            spec_model=Port,
            status_model=SampleStatus,
            scope="Cluster",
        )
    )
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert root["required"] == ["spec"]
    assert "scale" not in crd["spec"]["versions"][0]["subresources"]
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["singular"] == "portable"
    assert_structural(root)


def test_condition_column_shows_a_field_of_one_condition() -> None:
    column = condition_column("Why", "Ready", "reason", "Why it is ready or not", priority=1)
    assert column.to_kube() == {
        "name": "Why",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        "description": "Why it is ready or not",
        "priority": 1,
    }


def test_sample_is_an_object_of_the_resource() -> None:
    assert DESCRIPTOR.sample("one", SampleSpec(max_replicas=3)) == {
        "apiVersion": "samples.opsuite.dev/v1alpha1",
        "kind": "Sample",
        "metadata": {"name": "one"},
        "spec": SampleSpec(max_replicas=3).to_kube(),
    }


SAMPLE_MODELS: dict[str, Any] = {
    "GROUP": "samples.opsuite.dev",
    "VERSION": "v1alpha1",
    "KIND": "Sample",
    "PLURAL": "samples",
    "DESCRIPTION": "A sample resource.",
    "SHORT_NAMES": ("smp",),
    "SampleSpec": SampleSpec,
    "SampleStatus": SampleStatus,
}
"""What a models module defining DESCRIPTOR's resource holds."""


def _models_module(names: dict[str, Any]) -> ModuleType:
    module = ModuleType("samples_operator.models")
    for name, value in names.items():
        setattr(module, name, value)
    return module


def test_descriptor_of_a_models_module_takes_its_names_and_models() -> None:
    models = _models_module({**SAMPLE_MODELS, "SampleSpecial": Port})
    derived = {"group", "version", "kind", "plural", "description", "short_names"}
    derived |= {"spec_model", "status_model"}
    others = {
        f.name: getattr(DESCRIPTOR, f.name)
        for f in dataclass_fields(DESCRIPTOR)
        if f.name not in derived
    }

    assert CrdDescriptor.of(models, **others) == DESCRIPTOR
    assert DESCRIPTOR.name == "samples.samples.opsuite.dev"


@pytest.mark.parametrize("missing", ["PLURAL", "DESCRIPTION", "SampleStatus"])
def test_descriptor_of_a_models_module_names_what_it_lacks(missing: str) -> None:
    names = {k: v for k, v in SAMPLE_MODELS.items() if k != missing}
    with pytest.raises(ValueError, match=f"samples_operator.models defines no {missing}"):
        CrdDescriptor.of(_models_module(names))


@pytest.mark.parametrize(
    "scale",
    [
        ScaleSubresource(".spec.missing", ".status.replicas"),
        ScaleSubresource(".spec.mode", ".status.replicas"),
        ScaleSubresource(".status.replicas", ".status.replicas"),
        ScaleSubresource(".spec.maxReplicas", ".spec.minReplicas"),
        ScaleSubresource(".spec.maxReplicas", ".status.observedGeneration"),
        ScaleSubresource(".spec.maxReplicas", ".status.replicas", ".status.replicas"),
        ScaleSubresource(".spec.maxReplicas", ".status.replicas", ".metadata.name"),
    ],
)
def test_scale_paths_are_checked(scale: ScaleSubresource) -> None:
    with pytest.raises(ValueError, match="scale"):
        build_crd(replace(DESCRIPTOR, scale=scale))


@pytest.mark.parametrize(
    "changes",
    [
        {"group": "nodot"},
        {"kind": "lower"},
        {"plural": "Samples"},
        {"singular": "sam_ple"},
        {"version": "1"},
        {"short_names": ("A",)},
        {"categories": ("",)},
        {"scope": "Global"},
    ],
)
def test_descriptor_rejects_invalid_names(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must"):
        replace(DESCRIPTOR, **changes)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"type": "date-time"},
        {"format": "duration"},
        {"json_path": "status.replicas"},
        {"priority": -1},
        {"name": ""},
    ],
)
def test_printer_column_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="column"):
        PrinterColumn(**{"name": "N", "type": "string", "json_path": ".spec.x", **kwargs})


def test_printer_column_format() -> None:
    column = PrinterColumn("Started", "string", ".status.started", format="date-time")
    assert column.to_kube()["format"] == "date-time"


def test_crd_yaml_is_deterministic_and_round_trips() -> None:
    crd = build_crd(DESCRIPTOR)
    text = crd_yaml(crd)
    assert text == crd_yaml(build_crd(DESCRIPTOR))
    assert yaml.safe_load(text) == crd
    assert text.startswith("apiVersion: apiextensions.k8s.io/v1\n")


def test_crd_yaml_quotes_yaml11_booleans() -> None:
    text = crd_yaml({"enum": ["y", "n", "True", "on", "x"], "y": 1})
    assert yaml.safe_load(text) == {"enum": ["y", "n", "True", "on", "x"], "y": 1}
    for quoted in ("- 'y'", "- 'n'", "'y': 1", "- 'True'", "- 'on'", "- x"):
        assert quoted in text
