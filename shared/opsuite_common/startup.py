"""An operator process's import phase: what each ``__main__`` imports inside :func:`importing`.

* **No garbage collection while importing.** An operator imports some tens of thousands of
  objects (kopf, aiohttp, pydantic, its models), none of them garbage, and the collector would
  walk them again and again as they are made; afterwards they are frozen (:func:`gc.freeze`),
  so that no later collection walks them either.
* **aiohttp without the trust store in its default TLS contexts.** ``aiohttp.connector`` makes
  two default client contexts when it is imported, each loading the system CA bundle. No
  connection of an operator uses them: kopf's connections carry the context of the cluster's
  credentials (``kopf.ConnectionInfo.as_ssl_context``), ``KubeApi``'s its own
  (:func:`opsuite_common.kube_transport.ssl_context`), and the process makes no other client
  request. So aiohttp is imported first, with OpenSSL's default CA locations pointed at nothing:
  its two defaults trust no server (a connection made with them would fail, never trust
  wrongly), and the environment is restored at once, so every context made later (kopf's,
  ours) loads the system trust store as before.

Only the operators' entry points import this module: a test or a tool that imports
:mod:`opsuite_common` keeps aiohttp and the collector as they are.
"""

from __future__ import annotations

import gc
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


@contextmanager
def importing() -> Iterator[None]:
    """The block imports an operator (see the module docstring)."""
    gc.disable()
    try:
        with no_default_trust_store():
            import aiohttp.connector  # noqa: F401  # builds its default contexts, empty
        yield
    finally:
        gc.freeze()
        gc.enable()
