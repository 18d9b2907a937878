"""A PodDebugger's spec, validated as the API server's schema does, and the debug container it
describes (``kubectl debug --profile``'s security contexts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from opsuite_common.store import JSON
from poddebugger_operator.models import NON_ROOT_USER, PodDebuggerSpec, Profile


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


def container_body(spec: PodDebuggerSpec) -> JSON:
    """The debug container the spec describes, without its name."""
    body: JSON = {"image": spec.image}
    if spec.command:
        body["command"] = list(spec.command)
    if spec.args:
        body["args"] = list(spec.args)
    if spec.env:
        body["env"] = [{"name": e.name, "value": e.value} for e in spec.env]
    if spec.stdin:
        body["stdin"] = True
    if spec.tty:
        body["tty"] = True
    if spec.target_container:
        body["targetContainerName"] = spec.target_container
    context = security_context(spec.profile, spec.run_as_user)
    if context is not None:
        body["securityContext"] = context
    return body
