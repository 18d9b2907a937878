"""Secure metrics: bearer-token parsing, the review caches, and the HTTPS server's answers
(401 without a good token, 403 without the right, 500 when a review fails, 200 otherwise), with
the API server's reviews faked. e2e/test_metrics_security.py proves it against a real one."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter

from opsuite_common.fence import WriteFence
from opsuite_common.kube import KubeApi
from opsuite_common.kubeconfig import Configuration
from opsuite_common.metrics_auth import (
    ALLOW_TTL,
    DENY_TTL,
    TOKEN_TTL,
    CertificateReloader,
    KubeReviewApi,
    MetricsAuth,
    ReviewFailed,
    TtlCache,
    UserInfo,
    bearer_token,
    self_signed_certificate,
    server_context,
)
from opsuite_common.metrics_server import metrics_server
from opsuite_common.options import parse_options
from opsuite_testkit.local_server import address, serve

READER = UserInfo("system:serviceaccount:monitoring:prometheus", "uid-1", ("system:authenticated",))
STRANGER = UserInfo("system:serviceaccount:default:nobody")


class FakeReviews:
    """The API server's answers: tokens by value, the users allowed, and call counts."""

    def __init__(self) -> None:
        self.users = {"reader-token": READER, "stranger-token": STRANGER}
        self.allowed = {(READER, "get", "/metrics")}
        self.token_reviews = 0
        self.access_reviews = 0
        self.broken = False

    async def review_token(self, token: str) -> UserInfo | None:
        self.token_reviews += 1
        if self.broken:
            raise ConnectionError("API server unreachable")
        return self.users.get(token)

    async def review_access(self, user: UserInfo, verb: str, path: str) -> bool:
        self.access_reviews += 1
        if self.broken:
            raise ConnectionError("API server unreachable")
        return (user, verb, path) in self.allowed


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc.def", "abc.def"),
        ("Bearer abc extra", "abc"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("Token abc", None),
    ],
)
def test_bearer_token_is_read_as_the_api_server_reads_it(
    header: str | None, token: str | None
) -> None:
    assert bearer_token(header) == token


def test_ttl_cache_expires_each_entry_after_its_ttl_and_evicts_the_oldest() -> None:
    clock = FakeClock()
    cache = TtlCache(size=2, clock=clock)
    cache.put("a", 1, ttl=10)
    cache.put("b", None, ttl=30)
    assert cache.get("a") == (True, 1)
    assert cache.get("b") == (True, None)  # a cached "no" is found
    clock.now += 10
    assert cache.get("a") == (False, None)
    assert cache.get("b") == (True, None)
    cache.put("c", 3, ttl=30)
    cache.put("d", 4, ttl=30)
    assert cache.get("b") == (False, None)  # evicted: the oldest of three
    assert cache.get("c") == (True, 3)
    assert cache.get("d") == (True, 4)


async def test_token_reviews_are_cached_for_a_minute_good_or_bad() -> None:
    reviews, clock = FakeReviews(), FakeClock()
    auth = MetricsAuth(reviews, clock=clock)
    assert await auth.authenticate("reader-token") == READER
    assert await auth.authenticate("bad-token") is None
    assert await auth.authenticate("reader-token") == READER
    assert await auth.authenticate("bad-token") is None
    assert reviews.token_reviews == 2
    clock.now += TOKEN_TTL
    assert await auth.authenticate("reader-token") == READER
    assert reviews.token_reviews == 3


async def test_access_is_cached_five_minutes_when_allowed_and_30_seconds_when_denied() -> None:
    reviews, clock = FakeReviews(), FakeClock()
    auth = MetricsAuth(reviews, clock=clock)
    assert await auth.authorize(READER, "get", "/metrics")
    assert not await auth.authorize(STRANGER, "get", "/metrics")
    assert not await auth.authorize(READER, "post", "/metrics")  # another verb: its own review
    assert reviews.access_reviews == 3
    reviews.allowed.add((STRANGER, "get", "/metrics"))
    clock.now += DENY_TTL - 1
    assert not await auth.authorize(STRANGER, "get", "/metrics")
    clock.now += 1
    assert await auth.authorize(STRANGER, "get", "/metrics")
    reviews.allowed.clear()
    clock.now += ALLOW_TTL - DENY_TTL - 1
    assert await auth.authorize(READER, "get", "/metrics")
    clock.now += DENY_TTL + 1
    assert not await auth.authorize(READER, "get", "/metrics")
    assert reviews.access_reviews == 5


async def test_failed_reviews_raise_and_are_not_cached() -> None:
    reviews = FakeReviews()
    auth = MetricsAuth(reviews)
    reviews.broken = True
    with pytest.raises(ReviewFailed, match="TokenReview failed: API server unreachable"):
        await auth.authenticate("reader-token")
    with pytest.raises(ReviewFailed, match="SubjectAccessReview failed"):
        await auth.authorize(READER, "get", "/metrics")
    reviews.broken = False
    assert await auth.authenticate("reader-token") == READER
    assert await auth.authorize(READER, "get", "/metrics")


async def _get(port: int, token: str | None, path: str = "/metrics") -> tuple[int, str]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{port}{path}", headers=headers, ssl=False) as response,
    ):
        return response.status, await response.text()


async def test_secure_server_answers_401_403_500_and_200_like_controller_runtime() -> None:
    registry = CollectorRegistry()
    Counter("secret_total", "A metric only readers may see", registry=registry).inc()
    reviews = FakeReviews()
    server = metrics_server(
        "127.0.0.1:0", registry, ssl_context=server_context(), auth=MetricsAuth(reviews)
    )
    await server.start()
    assert server.port is not None
    try:
        assert await _get(server.port, None) == (401, "Unauthorized\n")
        assert await _get(server.port, "bad-token") == (401, "Unauthorized\n")
        status, text = await _get(server.port, "stranger-token")
        assert (status, text) == (403, f"Authorization denied for user {STRANGER.username}\n")
        status, text = await _get(server.port, "reader-token")
        assert status == 200
        assert "secret_total 1.0" in text
        reviews.broken = True
        status, text = await _get(server.port, "other-token")
        assert status == 500
        assert "secret" not in text
        # Plain HTTP gets no metrics from the TLS port.
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                await session.get(f"http://127.0.0.1:{server.port}/metrics")
    finally:
        await server.stop()


def test_self_signed_certificate_names_the_host_localhost_and_loopback() -> None:
    cert_pem, key_pem = self_signed_certificate("op-7d9f")
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["op-7d9f", "localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.issuer == cert.subject
    assert b"PRIVATE KEY" in key_pem


async def test_mounted_certificate_is_the_one_served(tmp_path: Path) -> None:
    """With --metrics-cert-path the server presents that certificate: a client trusting only
    it connects, with hostname verification."""
    cert_pem, key_pem = self_signed_certificate("metrics.example")
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    context = server_context(str(tmp_path), "cert.pem", "key.pem")
    server = metrics_server("127.0.0.1:0", CollectorRegistry(), ssl_context=context)
    await server.start()
    assert server.port is not None
    trust = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://localhost:{server.port}/metrics", ssl=trust) as response,
        ):
            assert response.status == 200
        other = ssl.create_default_context(cadata=self_signed_certificate("x")[0].decode())
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(f"https://localhost:{server.port}/metrics", ssl=other)
    finally:
        await server.stop()


def test_metrics_secure_flags_and_environment() -> None:
    plain = parse_options("op", "", [], environ={})
    assert (plain.metrics_secure, plain.metrics_cert_path) == (False, "")
    secure = parse_options(
        "op",
        "",
        ["--metrics-secure", "--metrics-cert-path=/certs", "--metrics-cert-key=key.pem"],
        environ={},
    )
    assert secure.metrics_secure
    assert secure.metrics_cert_path == "/certs"
    assert (secure.metrics_cert_name, secure.metrics_cert_key) == ("tls.crt", "key.pem")
    assert parse_options("op", "", [], environ={"OPSUITE_METRICS_SECURE": "true"}).metrics_secure
    assert not parse_options("op", "", ["--metrics-secure=false"], environ={}).metrics_secure


async def test_a_renewed_mounted_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    """Like controller-runtime's certwatcher: once the files change (a renewal), new connections
    get the new certificate, with SNI (a name) and without (an IP address); an unreadable change
    keeps the old one."""

    def write(name: str) -> str:
        cert, key = self_signed_certificate(name)
        (tmp_path / "tls.key").write_bytes(key)
        (tmp_path / "tls.crt").write_bytes(cert)
        return cert.decode()

    async def status(host: str, ca: str) -> int:
        trust = ssl.create_default_context(cadata=ca)
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"https://{host}:{server.port}/metrics", ssl=trust) as response,
        ):
            return response.status

    old = write("metrics.example")
    reloader = CertificateReloader(tmp_path / "tls.crt", tmp_path / "tls.key", interval=0)
    server = metrics_server("127.0.0.1:0", CollectorRegistry(), ssl_context=reloader.context)
    await server.start()
    try:
        assert await status("localhost", old) == 200
        new = write("metrics.example")
        for host in ("localhost", "127.0.0.1"):
            assert await status(host, new) == 200
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await status(host, old)
        (tmp_path / "tls.crt").write_text("not a certificate")
        assert await status("localhost", new) == 200
    finally:
        await server.stop()


async def test_kube_review_api_sends_the_reviews_and_reads_their_answers() -> None:
    """Against a local API server: the TokenReview's user, the SubjectAccessReview's spec
    (groups, uid and extra only when the user has them) and answer; sent unfenced, as a standby
    serves /metrics too."""
    received: list[dict[str, Any]] = []

    async def token_review(request: web.Request) -> web.Response:
        review = await request.json()
        received.append(review)
        status: dict[str, Any] = {"authenticated": review["spec"]["token"] == "good"}
        if status["authenticated"]:
            status["user"] = {
                "username": READER.username,
                "uid": "uid-1",
                "groups": ["system:authenticated"],
                "extra": {"scopes": ["a", "b"]},
            }
        return web.json_response({**review, "status": status}, status=201)

    async def access_review(request: web.Request) -> web.Response:
        review = await request.json()
        received.append(review)
        allowed = review["spec"]["user"] == READER.username
        return web.json_response({**review, "status": {"allowed": allowed}}, status=201)

    app = web.Application()
    app.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", token_review)
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", access_review)
    runner = await serve(app)
    host = f"http://{address(runner)}"
    kube = KubeApi(Configuration(host=host), user_agent="t", fence=WriteFence())  # closed
    try:
        reviews = KubeReviewApi(kube)
        assert await reviews.review_token("bad") is None
        user = await reviews.review_token("good")
        assert user == UserInfo(
            READER.username, "uid-1", ("system:authenticated",), (("scopes", ("a", "b")),)
        )
        assert user is not None
        assert await reviews.review_access(user, "get", "/metrics")
        assert not await reviews.review_access(STRANGER, "get", "/metrics")
    finally:
        await kube.close()
        await runner.cleanup()
    assert received[0]["kind"] == "TokenReview"
    assert received[0]["spec"] == {"token": "bad"}
    assert received[2]["spec"] == {
        "user": READER.username,
        "groups": ["system:authenticated"],
        "uid": "uid-1",
        "extra": {"scopes": ["a", "b"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    assert received[3]["spec"] == {
        "user": STRANGER.username,
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
