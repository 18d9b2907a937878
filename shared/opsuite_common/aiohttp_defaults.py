"""aiohttp imported without loading the system trust store into its default TLS contexts.

``aiohttp.connector`` makes two default client contexts when it is imported, and each loads
the system CA bundle: about 40 ms and 2 MiB of every operator's start. No connection of an
operator uses them: kopf's connections carry the context of the cluster's credentials
(``kopf.ConnectionInfo.as_ssl_context``), ``KubeApi``'s its own
(:func:`opsuite_common.kube_transport.ssl_context`), and the process makes no other client
request. So aiohttp is imported here, first, with OpenSSL's default CA locations pointed at
nothing: its two defaults trust no server (a connection made with them would fail, never trust
wrongly), and the environment is restored at once, so every context made later (kopf's, ours)
loads the system trust store as before. Imported by :mod:`opsuite_common` itself, before any
module that imports aiohttp or kopf.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

TRUST_STORE_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")
"""The variables that tell OpenSSL where the default CA certificates are."""


@contextmanager
def no_default_trust_store() -> Iterator[None]:
    """OpenSSL's default CA file and directory are empty (``os.devnull``) inside the block."""
    saved = {name: os.environ.get(name) for name in TRUST_STORE_VARIABLES}
    os.environ.update(dict.fromkeys(TRUST_STORE_VARIABLES, os.devnull))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


with no_default_trust_store():
    import aiohttp.connector  # noqa: F401  # builds its default contexts, empty
