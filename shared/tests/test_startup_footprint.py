"""What an operator's process loads and does at start-up (#21, #36): libraries that only an
optional feature needs are imported when that feature is used, since each one stays resident for
the life of the process (``cryptography``, for the self-signed metrics certificate, is about
9 MiB of RSS); work that only the generators need (reading the models' attribute docstrings) or
that no connection uses (aiohttp's default contexts' trust store) is not done, and the
collector does not walk what is imported (opsuite_common.startup)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from opsuite_common.kube_model import KubeModel
from opsuite_packaging import operators as operator_list

OPERATORS = [op.name for op in operator_list.OPERATORS]
OPTIONAL = {"cryptography"}
"""Top-level packages the runtime uses only on request (``--metrics-secure`` without a
mounted certificate)."""


def _loaded_after(statement: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running ``statement``."""
    out = _run(f"import sys\n{statement}\nprint('\\n'.join(sys.modules))")
    return {name.split(".")[0] for name in out.split()}


@pytest.mark.parametrize("operator", OPERATORS)
def test_an_operator_starts_without_loading_optional_libraries(operator: str) -> None:
    loaded = _loaded_after(f"import {operator}_operator.__main__")
    assert "kopf" in loaded  # the import ran the real wiring
    assert not loaded & OPTIONAL, sorted(loaded & OPTIONAL)


def test_the_self_signed_certificate_loads_them_when_used() -> None:
    """The check can fail: making a certificate does load cryptography."""
    statement = (
        "from opsuite_common.metrics_auth import self_signed_certificate\n"
        "self_signed_certificate('localhost')"
    )
    assert "cryptography" in _loaded_after(statement)


def _run(statement: str, env: dict[str, str] | None = None) -> str:
    """What a fresh interpreter prints running ``statement``."""
    return subprocess.run(
        [sys.executable, "-c", statement],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout.strip()


TRUST_STORE = (
    "import os, ssl\n"
    "{imports}\n"
    "import aiohttp.connector as c\n"
    "print(c._SSL_CONTEXT_VERIFIED.cert_store_stats()['x509_ca'],"
    " c._SSL_CONTEXT_UNVERIFIED.cert_store_stats()['x509_ca'],"
    " ssl.create_default_context().cert_store_stats()['x509_ca'] > 0,"
    " os.environ.get('SSL_CERT_FILE'), os.environ.get('SSL_CERT_DIR'))"
)


@pytest.mark.parametrize("operator", OPERATORS)
def test_aiohttp_default_contexts_skip_the_system_trust_store(operator: str) -> None:
    """aiohttp's import-time default contexts (opsuite_common.startup) load no CA
    bundle, and a context made afterwards still loads the system's, the environment as it was."""
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    plain = _run(TRUST_STORE.format(imports="pass"), env)
    assert plain.split()[0] != "0", plain  # the machine has a trust store to skip
    assert plain.endswith("True None None"), plain
    loaded = _run(TRUST_STORE.format(imports=f"import {operator}_operator.__main__"), env)
    assert loaded == "0 0 True None None"
    env |= {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SSL_CERT_DIR": "/nowhere"}
    given = _run(TRUST_STORE.format(imports=f"import {operator}_operator.__main__"), env)
    assert given.split()[3:] == ["/etc/ssl/certs/ca-certificates.crt", "/nowhere"]


COLLECTIONS = (
    "import gc\n"
    "{imports}\n"
    "before = [s['collections'] for s in gc.get_stats()]\n"
    "{statement}\n"
    "after = [s['collections'] for s in gc.get_stats()]\n"
    "print(gc.isenabled(), gc.get_freeze_count(), sum(after) - sum(before))"
)


@pytest.mark.parametrize("operator", OPERATORS)
def test_an_operator_imports_without_collecting_and_freezes_what_it_imported(
    operator: str,
) -> None:
    """The import of an operator's entry point runs no collection and leaves the collector
    on, with the imported objects frozen; the same modules imported as a library (tests,
    tools) are collected as usual, which is what the first check would see without
    opsuite_common.startup."""
    main = _run(
        COLLECTIONS.format(
            imports="import opsuite_common.startup",
            statement=f"import {operator}_operator.__main__",
        )
    )
    enabled, frozen, collections = main.split()
    assert (enabled, collections) == ("True", "0"), main
    assert int(frozen) > 50_000, main
    library = _run(
        COLLECTIONS.format(
            imports="pass", statement=f"import {operator}_operator.handlers, opsuite_common.manager"
        )
    )
    enabled, frozen, collections = library.split()
    assert (enabled, frozen) == ("True", "0"), library
    assert int(collections) > 10, library


def test_no_model_reads_its_docstrings_at_import() -> None:
    """Parsing the models' sources for attribute docstrings is the generators' work
    (opsuite_packaging.descriptions), not every start's."""
    for operator in OPERATORS:
        importlib.import_module(f"{operator}_operator.models")
    models = _subclasses(KubeModel)
    assert len(models) > 10
    reading = [m.__name__ for m in models if m.model_config.get("use_attribute_docstrings")]
    assert reading == []


def _subclasses(cls: type[KubeModel]) -> list[type[KubeModel]]:
    found = [cls]
    for sub in cls.__subclasses__():
        found += _subclasses(sub)
    return found
