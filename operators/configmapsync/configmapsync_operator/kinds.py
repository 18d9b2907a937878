"""The two kinds of sync on one engine: ConfigMapSync copies ConfigMaps, SecretSync Secrets.

A :class:`SyncKind` holds what differs between them, for the pure planner and for the code that
calls the API: the names (in messages, paths and RBAC), the spec model, whether copies keep the
source's ``type`` and whether the objects' values are confidential. Everything else (consent,
destinations, key filters, ownership, status) is the same code for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from configmapsync_operator import models


@dataclass(frozen=True)
class SyncKind:
    """One kind of sync and the kind of object it copies."""

    kind: str
    """The sync's kind: ConfigMapSync, SecretSync."""
    plural: str
    """Its resource: configmapsyncs, secretsyncs."""
    object_kind: str
    """The kind copied: ConfigMap, Secret."""
    resource: str
    """The resource copied (core group): configmaps, secrets."""
    spec_model: type[models.SyncSpec]
    name_field: str
    """The spec field naming the source: configMapName, secretName."""
    content_fields: tuple[str, ...]
    """The fields holding the content, which the key filter selects from and a patch
    replaces."""
    typed: bool
    """Copies keep the source's ``type``, which cannot change: a copy of another type is
    replaced, an unmanaged object of another type never taken over."""
    confidential: bool
    """The values are secret: no message quotes what the API server answered (an admission
    webhook may echo the object it refused)."""

    def refusal(self, source: Mapping[str, Any]) -> str | None:
        """Why ``source`` is never copied, or None. A service-account token authenticates as
        its ServiceAccount wherever it is read: a copy in another namespace would hand that
        identity to whoever reads Secrets there."""
        kind = source.get("type")
        if self.typed and kind == models.SERVICE_ACCOUNT_TOKEN:
            meta = source.get("metadata") or {}
            return (
                f"{self.object_kind} {meta.get('namespace')}/{meta.get('name')} is of type "
                f"{kind}, which is never copied: a token authenticates as its ServiceAccount "
                "wherever it is read; copy a Secret of another type"
            )
        return None


CONFIGMAPS = SyncKind(
    kind=models.KIND,
    plural=models.PLURAL,
    object_kind="ConfigMap",
    resource="configmaps",
    spec_model=models.ConfigMapSyncSpec,
    name_field="configMapName",
    content_fields=("data", "binaryData"),
    typed=False,
    confidential=False,
)
SECRETS = SyncKind(
    kind=models.SECRET_KIND,
    plural=models.SECRET_PLURAL,
    object_kind="Secret",
    resource="secrets",
    spec_model=models.SecretSyncSpec,
    name_field="secretName",
    content_fields=("data",),
    typed=True,
    confidential=True,
)
