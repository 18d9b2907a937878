"""Generate ``apiextensions.k8s.io/v1`` CustomResourceDefinitions from pydantic models.

The pydantic JSON schema is rewritten into a structural OpenAPI v3 schema: ``$ref`` inlined,
``Optional[X]`` as ``X`` (optional means "not required", ``nullable`` is never used),
``int | str`` as ``x-kubernetes-int-or-string``, ``dict[str, Any]``/``Any`` as
``x-kubernetes-preserve-unknown-fields``, ``set[X]`` as ``x-kubernetes-list-type: set``.
Constructs the API server cannot express (other unions, tuples, recursive models, nullable
required fields) raise :class:`ValueError` naming the offending path. Dict key constraints and
string formats the API server does not know are left to pydantic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, TypeAlias

import yaml
from pydantic import BaseModel
from pydantic.config import JsonDict

from opsuite_common.kube_model import KubeModel
from opsuite_packaging.descriptions import described_schema

Schema: TypeAlias = dict[str, Any]

_XV = "x-kubernetes-validations"
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
_INT_OR_STRING = "x-kubernetes-int-or-string"
_LIST_TYPE = "x-kubernetes-list-type"
_MAP_KEYS = "x-kubernetes-list-map-keys"
_NULL = {"type": "null"}
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
_DROPPED = frozenset({"title", "examples", "deprecated", "readOnly", "writeOnly", "propertyNames"})
_KEPT = frozenset(
    {
        "type",
        "description",
        "enum",
        "minimum",
        "maximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "anyOf",
        _XV,
        _PRESERVE,
        _INT_OR_STRING,
        _LIST_TYPE,
        _MAP_KEYS,
        "x-kubernetes-map-type",
        "x-kubernetes-embedded-resource",
    }
)
# Formats the API server validates (kube-openapi strfmt); "duration" is left out on purpose:
# pydantic's ISO 8601 durations are not Go durations.
_STRING_FORMATS = frozenset(
    {
        *("bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "byte"),
        *("uuid", "uuid3", "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn"),
        *("hexcolor", "rgbcolor", "password", "date", "date-time", "datetime"),
    }
)
_NUMBER_FORMATS = {"integer": {"int32", "int64"}, "number": {"float", "double"}}
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_GROUP = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+")
_KIND = re.compile(r"[A-Z][A-Za-z0-9]*")
_COLUMN_TYPES = frozenset({"integer", "number", "string", "boolean", "date"})
_COLUMN_FORMATS = frozenset(
    {"int32", "int64", "float", "double", "byte", "date", "date-time", "password"}
)


@dataclass(frozen=True)
class PrinterColumn:
    """One ``kubectl get`` column (``additionalPrinterColumns`` entry)."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0
    format: str | None = None

    def __post_init__(self) -> None:
        if self.type not in _COLUMN_TYPES:
            raise ValueError(f"column {self.name}: type must be one of {sorted(_COLUMN_TYPES)}")
        if self.format is not None and self.format not in _COLUMN_FORMATS:
            raise ValueError(f"column {self.name}: unsupported format {self.format!r}")
        if not self.json_path.startswith(".") or self.priority < 0 or not self.name:
            raise ValueError(f"column {self.name!r}: needs a name, a .path and priority >= 0")

    def to_kube(self) -> dict[str, Any]:
        """The ``additionalPrinterColumns`` entry."""
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        if self.format:
            column["format"] = self.format
        return column


def condition_column(
    name: str, condition: str, field: str, description: str, priority: int = 0
) -> PrinterColumn:
    """A string column showing ``field`` (``status``, ``reason``) of the condition
    ``condition``."""
    path = f'.status.conditions[?(@.type=="{condition}")].{field}'
    return PrinterColumn(name, "string", path, description, priority=priority)


@dataclass(frozen=True)
class ScaleSubresource:
    """The ``scale`` subresource; paths are checked against the generated schema."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class CrdDescriptor:
    """Everything needed to render one single-version CRD."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str = ""
    """Default: the kind in lower case (as the API server defaults it)."""
    description: str
    spec_model: type[BaseModel]
    status_model: type[BaseModel]
    scope: Literal["Namespaced", "Cluster"] = "Namespaced"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("opsuite",)
    """Default: ``opsuite``, so that ``kubectl get opsuite`` lists every opsuite resource."""
    printer_columns: tuple[PrinterColumn, ...] = ()
    scale: ScaleSubresource | None = None
    validations: tuple[JsonDict, ...] = ()
    """Root-level CEL rules (from ``cel()``); ``self`` is the whole object."""

    def __post_init__(self) -> None:
        if not self.singular:
            object.__setattr__(self, "singular", self.kind.lower())
        if not _GROUP.fullmatch(self.group):
            raise ValueError(f"group {self.group!r} must be a DNS subdomain with a dot")
        if not _KIND.fullmatch(self.kind):
            raise ValueError(f"kind {self.kind!r} must be CamelCase alphanumeric")
        if self.scope not in ("Namespaced", "Cluster"):
            raise ValueError(f"scope must be Namespaced or Cluster, got {self.scope!r}")
        names = (self.version, self.plural, self.singular, *self.short_names, *self.categories)
        for name in names:
            if not _DNS_LABEL.fullmatch(name):
                raise ValueError(f"{name!r} must be a lowercase DNS-1035 label")

    @classmethod
    def of(cls, models: ModuleType, **fields: Any) -> CrdDescriptor:
        """The descriptor of the custom resource an operator's ``models`` module defines: its
        ``GROUP``, ``VERSION``, ``KIND``, ``PLURAL``, ``DESCRIPTION`` (what ``kubectl explain``
        says of the resource) and ``SHORT_NAMES``, and its models ``<KIND>Spec`` and
        ``<KIND>Status``; ``fields`` are the others (printer columns...)."""
        try:
            names = ("group", "version", "kind", "plural", "description", "short_names")
            identity = {field: getattr(models, field.upper()) for field in names}
            kind = identity["kind"]
            spec, status = getattr(models, f"{kind}Spec"), getattr(models, f"{kind}Status")
        except AttributeError as missing:
            raise ValueError(f"{models.__name__} defines no {missing.name}") from None
        return cls(**identity, spec_model=spec, status_model=status, **fields)

    @property
    def name(self) -> str:
        """The CRD's name, ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    def sample(self, name: str, spec: KubeModel) -> dict[str, Any]:
        """An object of this resource named ``name`` with ``spec`` (for the chart's samples)."""
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec.to_kube(),
        }


def build_crd(desc: CrdDescriptor) -> dict[str, Any]:
    """Render ``desc`` as an ``apiextensions.k8s.io/v1`` CustomResourceDefinition dict."""
    spec = structural_schema(desc.spec_model)
    root: Schema = {
        "type": "object",
        "description": desc.description,
        "properties": {
            "apiVersion": {
                "type": "string",
                "description": "The versioned schema of this representation of an object.",
            },
            "kind": {"type": "string", "description": "The REST resource this object represents."},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": structural_schema(desc.status_model),
        },
    }
    if spec.get("required"):
        root["required"] = ["spec"]
    if desc.validations:
        root[_XV] = list(desc.validations)
    subresources: dict[str, Any] = {"status": {}}
    if desc.scale is not None:
        subresources["scale"] = _scale(desc.scale, root)
    columns = [c.to_kube() for c in desc.printer_columns]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    names: dict[str, Any] = {
        "kind": desc.kind,
        "listKind": f"{desc.kind}List",
        "plural": desc.plural,
        "singular": desc.singular,
    }
    if desc.short_names:
        names["shortNames"] = list(desc.short_names)
    if desc.categories:
        names["categories"] = list(desc.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": desc.name},
        "spec": {
            "group": desc.group,
            "names": names,
            "scope": desc.scope,
            "versions": [
                {
                    "name": desc.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": subresources,
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Quotes the YAML 1.1 booleans y/n, which PyYAML leaves bare but Go YAML reads as bools."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if value in ("y", "Y", "n", "N") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def crd_yaml(crd: dict[str, Any]) -> str:
    """Deterministic YAML (sorted keys) for writing a CRD to a file."""
    return yaml.dump(crd, Dumper=_Dumper, sort_keys=True, allow_unicode=True, width=100)


def structural_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema of ``model`` (its aliases, its pydantic constraints)."""
    raw = described_schema(model)
    defs = raw.pop("$defs", {})
    return _convert(raw, defs, (), model.__name__)


def _merge(base: Schema, override: Schema) -> Schema:
    """``override`` on top of ``base``; CEL rules of both are kept."""
    merged = {**base, **override}
    rules = base.get(_XV, []) + override.get(_XV, [])
    if rules:
        merged[_XV] = rules
    return merged


def _without(node: Schema, key: str) -> Schema:
    return {k: v for k, v in node.items() if k != key}


def _flatten(
    node: Schema, defs: Schema, refs: tuple[str, ...], path: str
) -> tuple[Schema, tuple[str, ...]]:
    """Inline ``$ref``; collapse ``allOf``/``anyOf``/``oneOf`` of ``X | None`` or ``int | str``."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in refs:
            raise ValueError(f"{path}: recursive model {name} has no structural schema")
        return _flatten(_merge(defs[name], _without(node, "$ref")), defs, (*refs, name), path)
    for junctor in ("allOf", "anyOf", "oneOf"):
        if junctor not in node:
            continue
        branches = [b for b in node[junctor] if b != _NULL]
        if len(branches) == 1:
            return _flatten(_merge(branches[0], _without(node, junctor)), defs, refs, path)
        if sorted(branches, key=str) == [{"type": "integer"}, {"type": "string"}]:
            int_or_string = {
                _INT_OR_STRING: True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            }
            return {**_without(node, junctor), **int_or_string}, refs
        raise ValueError(f"{path}: only X | None and int | str unions are supported")
    return node, refs


def _convert(raw: Schema, defs: Schema, refs: tuple[str, ...], path: str) -> Schema:
    node, refs = _flatten(raw, defs, refs, path)
    out: Schema = {}
    for key, value in node.items():
        if key == "description":
            # Docstrings wrap lines; kubectl explain re-wraps, so keep one line per paragraph.
            out[key] = "\n\n".join(" ".join(p.split()) for p in value.split("\n\n"))
        elif key in _KEPT:
            out[key] = value
        elif key == "const":
            out["enum"] = [value]
        elif key == "format":
            if value in _NUMBER_FORMATS.get(node.get("type", ""), _STRING_FORMATS):
                out["format"] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if bound in node:
                raise ValueError(f"{path}: both {bound} and {key} set")
            out[bound], out[key] = value, True
        elif key == "default":
            if value is not None:
                out["default"] = _strip_none(value)
        elif key == "properties":
            out["properties"] = _properties(value, node.get("required", []), defs, refs, path)
        elif key == "required":
            out["required"] = list(value)
        elif key == "items":
            out["items"] = _convert(value, defs, refs, f"{path}[]")
        elif key == "additionalProperties":
            if value is True:
                out[_PRESERVE] = True
            elif value is not False:
                out["additionalProperties"] = _convert(value, defs, refs, f"{path}{{}}")
        elif key == "patternProperties" and len(value) == 1:
            (values,) = value.values()
            out["additionalProperties"] = _convert(values, defs, refs, f"{path}{{}}")
        elif key == "uniqueItems":
            if value:
                out.setdefault(_LIST_TYPE, "set")
        elif key not in _DROPPED:
            raise ValueError(f"{path}: unsupported JSON schema keyword {key!r}")
    if "type" not in out and not out.get(_INT_OR_STRING):
        out[_PRESERVE] = True
    elif out.get("type", "object") not in _SCALARS | {"object", "array"}:
        raise ValueError(f"{path}: type {out['type']!r} has no OpenAPI v3 equivalent")
    _check_extensions(out, path)
    return out


def _properties(
    props: Schema, required: list[str], defs: Schema, refs: tuple[str, ...], path: str
) -> Schema:
    for name in required:
        if _NULL in props[name].get("anyOf", ()):
            raise ValueError(f"{path}.{name}: required but nullable; give it a default")
    return {name: _convert(sub, defs, refs, f"{path}.{name}") for name, sub in props.items()}


def _strip_none(value: Any) -> Any:
    """Drop ``None`` map values, as ``KubeModel.to_kube`` does, so defaults stay valid."""
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def _check_extensions(node: Schema, path: str) -> None:
    """The apiextensions rules on list and map types, checked at generation time."""
    list_type = node.get(_LIST_TYPE)
    if (list_type is not None or _MAP_KEYS in node) and node.get("type") != "array":
        raise ValueError(f"{path}: x-kubernetes-list-type needs an array")
    if "x-kubernetes-map-type" in node and node.get("type") != "object":
        raise ValueError(f"{path}: x-kubernetes-map-type needs an object")
    if list_type not in (None, "atomic", "set", "map"):
        raise ValueError(f"{path}: unknown x-kubernetes-list-type {list_type!r}")
    items = node.get("items", {})
    if list_type == "set" and items.get("type") not in _SCALARS:
        raise ValueError(f"{path}: a set list needs scalar items")
    if (list_type == "map") != bool(node.get(_MAP_KEYS)):
        raise ValueError(f"{path}: x-kubernetes-list-type map needs x-kubernetes-list-map-keys")
    if list_type == "map":
        props = items.get("properties", {})
        for key in node[_MAP_KEYS]:
            prop = props.get(key, {})
            if prop.get("type") not in _SCALARS:
                raise ValueError(f"{path}: map key {key!r} must be a scalar item property")
            if key not in items.get("required", ()) and "default" not in prop:
                raise ValueError(f"{path}: map key {key!r} must be required or defaulted")


def _scale(scale: ScaleSubresource, root: Schema) -> dict[str, str]:
    """The scale paths, checked: integer replicas with ``minimum >= 0``, a string selector.

    The API server rejects negative replicas at these paths; the selector field holds
    ``LabelSelector.selector_string()``.
    """
    paths: dict[str, tuple[str, tuple[str, ...]]] = {
        "specReplicasPath": (scale.spec_replicas_path, (".spec.",)),
        "statusReplicasPath": (scale.status_replicas_path, (".status.",)),
    }
    if scale.label_selector_path is not None:
        paths["labelSelectorPath"] = (scale.label_selector_path, (".spec.", ".status."))
    out: dict[str, str] = {}
    for name, (path, prefixes) in paths.items():
        node: Schema = root
        for part in path.split(".")[1:]:
            node = node.get("properties", {}).get(part, {})
        if name == "labelSelectorPath":
            valid = node.get("type") == "string"
        else:
            valid = node.get("type") == "integer" and node.get("minimum", -1) >= 0
        if not (path.startswith(prefixes) and valid):
            raise ValueError(f"scale {name} {path!r} must name a field of the right type")
        out[name] = path
    return out
