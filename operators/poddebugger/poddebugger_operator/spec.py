"""A PodDebugger's spec, validated as the API server's schema does, and the debug container it
describes (``kubectl debug --profile``'s security contexts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from opsuite_common.store import JSON
from poddebugger_operator.models import (
    NON_ROOT_USER,
    EnvVar,
    PodDebuggerSpec,
    Profile,
    VolumeMount,
)


class InvalidSpecError(ValueError):
    """The spec cannot be acted upon; the message is user-facing."""


def parse_spec(debugger: Mapping[str, Any]) -> PodDebuggerSpec:
    """Validate ``debugger["spec"]`` strictly, as the API server's schema does."""
    raw = debugger.get("spec")
    if not isinstance(raw, Mapping):
        raise InvalidSpecError("spec: Field required")
    try:
        spec = PodDebuggerSpec.model_validate(raw, strict=True)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        path = ".".join(str(part) for part in ("spec", *first["loc"]))
        raise InvalidSpecError(f"{path}: {first['msg'].removeprefix('Value error, ')}") from None
    if not spec.selector.match_labels and not spec.selector.match_expressions:
        raise InvalidSpecError("spec.selector: must not be empty")
    return spec


def security_context(profile: Profile, run_as_user: int | None = None) -> JSON | None:
    """The securityContext kubectl debug --profile gives a debug container, with
    ``run_as_user`` (restricted: :data:`NON_ROOT_USER` when None, so that an image running
    as root passes runAsNonRoot; elsewhere only when given)."""
    context: JSON
    if profile == "restricted":
        context = {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_USER if run_as_user is None else run_as_user,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        return context
    if profile == "general":
        context = {"capabilities": {"add": ["SYS_PTRACE"]}}
    elif profile == "netadmin":
        context = {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}
    elif profile == "sysadmin":
        context = {"privileged": True}
    else:  # baseline
        context = {}
    if run_as_user is not None:
        context["runAsUser"] = run_as_user
    return context or None


def _env(var: EnvVar) -> JSON:
    if var.value_from is None:
        return {"name": var.name, "value": var.value}
    source = var.value_from
    kind, ref = (
        ("secretKeyRef", source.secret_key_ref)
        if source.secret_key_ref is not None
        else ("configMapKeyRef", source.config_map_key_ref)
    )
    assert ref is not None  # EnvVarSource holds exactly one
    selector: JSON = {"name": ref.name, "key": ref.key}
    if ref.optional is not None:
        selector["optional"] = ref.optional
    return {"name": var.name, "valueFrom": {kind: selector}}


def _mount(mount: VolumeMount) -> JSON:
    body: JSON = {"name": mount.name, "mountPath": mount.mount_path}
    if mount.read_only is not None:
        body["readOnly"] = mount.read_only
    if mount.sub_path is not None:
        body["subPath"] = mount.sub_path
    return body


def custom_fields(spec: PodDebuggerSpec) -> JSON:
    """What the author chose of the container (kubectl debug's flags and --custom): every
    field but securityContext, which only the profile sets (:func:`merge`)."""
    body: JSON = {"image": spec.image}
    if spec.command:
        body["command"] = list(spec.command)
    if spec.args:
        body["args"] = list(spec.args)
    if spec.env:
        body["env"] = [_env(e) for e in spec.env]
    if spec.volume_mounts:
        body["volumeMounts"] = [_mount(m) for m in spec.volume_mounts]
    if spec.stdin:
        body["stdin"] = True
    if spec.tty:
        body["tty"] = True
    if spec.target_container:
        body["targetContainerName"] = spec.target_container
    return body


CUSTOM_FIELDS = frozenset(
    {"image", "command", "args", "env", "volumeMounts", "stdin", "tty", "targetContainerName"}
)
"""The only container fields a spec sets besides the profile's securityContext: none of
them widens what the profile allows (no securityContext, resources, ports, probes...)."""


def merge(custom: JSON, context: JSON | None) -> JSON:
    """The container: the author's ``custom`` fields (only :data:`CUSTOM_FIELDS`, whatever
    else it holds) with the profile's securityContext ``context`` over them, as kubectl debug
    --custom merges a partial container over its profile, except that nothing of the
    author's can touch the securityContext: a field outside the list is dropped."""
    body: JSON = {k: v for k, v in custom.items() if k in CUSTOM_FIELDS}
    if context is not None:
        body["securityContext"] = context
    return body


def container_body(spec: PodDebuggerSpec) -> JSON:
    """The debug container the spec describes, without its name."""
    return merge(custom_fields(spec), security_context(spec.profile, spec.run_as_user))
