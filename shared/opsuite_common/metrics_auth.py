"""Authenticated, authorized HTTPS for /metrics: controller-runtime's secure metrics serving.

What ``filters.WithAuthenticationAndAuthorization`` does for a kubebuilder v4 operator: the
bearer token of each request is checked with a TokenReview, then the authenticated user's right
to the request is checked with a SubjectAccessReview on the non-resource URL (``get`` on
``/metrics``, which the ``metrics-reader`` ClusterRole grants). No or a bad token answers 401,
a user without the right 403, a failed review 500. Results are cached as there: token reviews
for a minute, allowed access for five minutes, denied access for 30 seconds; failed reviews are
not cached. The serving certificate is the one mounted (``--metrics-cert-path``, re-read when
it changes) or, without one, a self-signed certificate made at start-up.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from aiohttp import web

from opsuite_common.kube import KubeApi, resource_path

log = logging.getLogger(__name__)

TOKEN_TTL = 60.0
"""Seconds a TokenReview's answer is reused (controller-runtime's CacheTTL)."""
ALLOW_TTL = 300.0
"""Seconds an allowing SubjectAccessReview is reused (AllowCacheTTL)."""
DENY_TTL = 30.0
"""Seconds a denying SubjectAccessReview is reused (DenyCacheTTL)."""
CACHE_SIZE = 1024
"""Entries each cache keeps (the least recently stored go first)."""
SELF_SIGNED_DAYS = 365


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user, as a TokenReview reports it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewApi(Protocol):
    """The two API calls of the filter."""

    async def review_token(self, token: str) -> UserInfo | None:
        """The token's user, or None when the API server does not authenticate it."""

    async def review_access(self, user: UserInfo, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""


class KubeReviewApi:
    """:class:`ReviewApi` through the operator's :class:`~opsuite_common.kube.KubeApi` (its
    session and identity), unfenced: a standby serves /metrics too."""

    PARALLEL = 4
    """Reviews in flight at most (scrapes are few, and their answers cached)."""

    def __init__(self, kube: KubeApi) -> None:
        """Review through ``kube``'s session."""
        self._kube = kube.unfenced(self.PARALLEL)

    async def review_token(self, token: str) -> UserInfo | None:
        """A TokenReview of ``token`` (the API server's default audiences)."""
        review = await self._kube.create(
            resource_path("authentication.k8s.io/v1", "tokenreviews"),
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        user = status.get("user")
        if not status.get("authenticated") or not user:
            return None
        return UserInfo(
            username=user.get("username") or "",
            uid=user.get("uid") or "",
            groups=tuple(user.get("groups") or ()),
            extra=tuple(sorted((k, tuple(v)) for k, v in (user.get("extra") or {}).items())),
        )

    async def review_access(self, user: UserInfo, verb: str, path: str) -> bool:
        """A SubjectAccessReview of ``verb`` on the non-resource URL ``path`` for ``user``."""
        spec: dict[str, object] = {
            "user": user.username,
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        review = await self._kube.create(
            resource_path("authorization.k8s.io/v1", "subjectaccessreviews"),
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        return (review.get("status") or {}).get("allowed") is True


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, as the API server reads it
    (scheme case-insensitive, one space); None when there is none."""
    if not header:
        return None
    parts = header.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


class TtlCache:
    """A bounded cache whose entries each expire after their own TTL (monotonic seconds)."""

    def __init__(self, size: int = CACHE_SIZE, clock: Callable[[], float] = time.monotonic):
        """Keep at most ``size`` entries."""
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, object]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, object]:
        """(found, value) of an unexpired entry."""
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return False, None
        return True, value

    def put(self, key: Hashable, value: object, ttl: float) -> None:
        """Store ``value`` for ``ttl`` seconds, evicting the oldest entry when full."""
        self._entries.pop(key, None)
        self._entries[key] = (self._clock() + ttl, value)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class ReviewFailed(Exception):
    """A TokenReview or SubjectAccessReview could not be made."""


class MetricsAuth:
    """Authenticate a bearer token and authorize its user, with controller-runtime's caches."""

    def __init__(
        self,
        api: ReviewApi,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Review through ``api``."""
        self._api = api
        self._tokens = TtlCache(clock=clock)
        self._access = TtlCache(clock=clock)

    async def authenticate(self, token: str) -> UserInfo | None:
        """The token's user (None: unauthenticated); raises ReviewFailed."""
        key = hashlib.sha256(token.encode()).digest()  # never keep the token itself
        found, cached = self._tokens.get(key)
        if found:
            return cached if isinstance(cached, UserInfo) else None
        try:
            user = await self._api.review_token(token)
        except Exception as exc:
            raise ReviewFailed(f"TokenReview failed: {exc}") from exc
        self._tokens.put(key, user, TOKEN_TTL)
        return user if isinstance(user, UserInfo) else None

    async def authorize(self, user: UserInfo, verb: str, path: str) -> bool:
        """Whether ``user`` may ``verb`` ``path``; raises ReviewFailed."""
        key = (user, verb, path)
        found, cached = self._access.get(key)
        if found:
            return cached is True
        try:
            allowed = await self._api.review_access(user, verb, path)
        except Exception as exc:
            raise ReviewFailed(f"SubjectAccessReview failed: {exc}") from exc
        self._access.put(key, allowed is True, ALLOW_TTL if allowed is True else DENY_TTL)
        return allowed is True

    def middleware(self) -> Callable[..., Awaitable[web.StreamResponse]]:
        """An aiohttp middleware answering 401/403/500 before the handler, as the filter does."""

        @web.middleware
        async def check(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            token = bearer_token(request.headers.get("Authorization"))
            try:
                user = None if token is None else await self.authenticate(token)
                if user is None:
                    return web.Response(status=401, text="Unauthorized\n")
                if not await self.authorize(user, request.method.lower(), request.path):
                    text = f"Authorization denied for user {user.username}\n"
                    return web.Response(status=403, text=text)
            except ReviewFailed as exc:
                log.error("metrics request not served: %s", exc)
                return web.Response(status=500, text="Authentication or authorization failed\n")
            return await handler(request)

        return check


def server_context(
    cert_path: str = "", cert_name: str = "tls.crt", key_name: str = "tls.key"
) -> ssl.SSLContext:
    """The TLS context of the metrics server: ``cert_path``/``cert_name`` and ``key_name``
    (re-read when they change, see :class:`CertificateReloader`) when ``cert_path`` is given,
    else a new self-signed certificate."""
    if cert_path:
        directory = Path(cert_path)
        return CertificateReloader(directory / cert_name, directory / key_name).context
    cert, key = self_signed_certificate(socket.gethostname())
    # ssl loads only from files: write them where only we can read, and remove them at once.
    with tempfile.TemporaryDirectory(prefix="metrics-cert-") as scratch:
        cert_file, key_file = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        return _load_context(cert_file, key_file)


def _load_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class CertificateReloader:
    """A mounted certificate, re-read when its files change, as controller-runtime's
    certwatcher does: cert-manager renews a Secret in place, and the kubelet swaps the files.

    At each TLS handshake (at most every ``interval`` seconds) the files' identities are
    compared; when they changed and load, new connections get the new certificate. A change that
    does not load (half-written) keeps the old one and is tried again.
    """

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        *,
        interval: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Load the certificate now (errors propagate: a bad mount fails the start)."""
        self._files = (cert_file, key_file)
        self._interval = interval
        self._clock = clock
        self._stamp = self._identity()
        self._current = _load_context(cert_file, key_file)
        self._checked = clock()
        self.context = _load_context(cert_file, key_file)
        """The context to serve with: each handshake switches to the current certificate."""
        self.context.sni_callback = self._on_handshake

    def _identity(self) -> tuple[tuple[int, int, int], ...]:
        stats = [os.stat(path) for path in self._files]  # follows the kubelet's symlinks
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def current(self) -> ssl.SSLContext:
        """The context of the newest certificate that loaded."""
        now = self._clock()
        if now - self._checked >= self._interval:
            self._checked = now
            try:
                stamp = self._identity()
                if stamp != self._stamp:
                    self._current = _load_context(*self._files)
                    self._stamp = stamp
                    log.info("metrics certificate reloaded from %s", self._files[0])
            except (OSError, ssl.SSLError) as exc:
                log.warning("metrics certificate not reloaded, keeping the old one: %s", exc)
        return self._current

    def _on_handshake(
        self, connection: ssl.SSLObject, _server_name: str | None, _context: ssl.SSLContext
    ) -> None:
        connection.context = self.current()


def self_signed_certificate(hostname: str) -> tuple[bytes, bytes]:
    """(certificate, private key), PEM: an ECDSA P-256 self-signed serving certificate for
    ``hostname``, localhost and 127.0.0.1, valid from now for SELF_SIGNED_DAYS days.

    ``cryptography`` is imported here, not at start-up: it stays resident once loaded (about
    9 MiB of RSS, #21), and only this start-up step of ``--metrics-secure`` needs it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.UTC)
    hosts = dict.fromkeys((hostname, "localhost"))
    names: list[x509.GeneralName] = [x509.DNSName(host) for host in hosts]
    names.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
