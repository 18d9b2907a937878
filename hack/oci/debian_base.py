"""The Python base image ``opsuite.local/python:3.11-bookworm``: Debian bookworm's python3.11
packages installed by debootstrap from the machine's own mirror, slimmed, kept as an OCI layout
folder in the cache under a key of its package list and recipe (the operator images are built
on it, and it is rebuilt only when that key changes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from oci.layer import remove, write_layer
from oci.layout import (
    DEFAULT_PATH,
    Descriptor,
    ImageConfig,
    index_manifest,
    write_image,
    write_index,
)
from oci.workspace import CACHE, as_root, hash_inputs, locked, log, run

BASE_SUITE = "bookworm"
BASE_PACKAGES = (
    "python3.11",
    "python3.11-venv",
    "python3-distutils",
    "python3-pip-whl",
    "python3-setuptools-whl",
    "ca-certificates",
)
# Bump when the slimming or the configuration below changes (part of the cache key).
BASE_RECIPE = "1"
BASE_NAME = "opsuite.local/python:3.11-bookworm"
# What a runtime bind-mounts or creates: left out of the base's layer.
BASE_EXCLUDE = ("dev", "proc", "sys", "run", "tmp")


def apt_sources() -> list[Path]:
    return [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]


def debian_mirror(suite: str = "bookworm", sources: Sequence[Path] | None = None) -> str:
    """The machine's Debian mirror for ``suite`` (main), from the apt sources (one-line and
    deb822 formats); else $OPSUITE_DEBIAN_MIRROR."""
    if sources is None:
        sources = apt_sources()
    for source in sources:
        if not source.is_file():
            continue
        text = source.read_text(errors="replace")
        if source.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields: dict[str, str] = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line or line[:1].isspace():
                        continue
                    key, _, value = line.partition(":")
                    fields[key.strip().lower()] = value.strip()
                if (
                    "deb" in fields.get("types", "").split()
                    and suite in fields.get("suites", "").split()
                    and "main" in fields.get("components", "").split()
                    and fields.get("enabled", "yes").lower() != "no"
                ):
                    return fields["uris"].split()[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if (
                    len(words) >= 4
                    and words[0] == "deb"
                    and words[2] == suite
                    and "main" in words[3:]
                ):
                    return words[1]
    mirror = os.environ.get("OPSUITE_DEBIAN_MIRROR", "")
    if not mirror:
        sys.exit(f"no apt source for Debian {suite} main: set OPSUITE_DEBIAN_MIRROR")
    return mirror


def slim(rootfs: Path) -> None:
    """Remove what an image does not need from a debootstrapped tree: documentation (copyright
    files stay), manuals, translations, apt's lists and caches, logs, and the host files
    debootstrap copied in."""
    doc = rootfs / "usr/share/doc"
    for path in doc.glob("*"):
        if path.is_dir() and not path.is_symlink():
            for child in path.iterdir():
                if child.name != "copyright":
                    remove(child)
        else:
            remove(path)
    for rel in ("usr/share/man", "usr/share/info", "usr/share/groff", "usr/share/lintian"):
        remove(rootfs / rel)
    for path in (rootfs / "usr/share/locale").glob("*"):
        if path.name != "locale.alias":
            remove(path)
    for rel in ("var/lib/apt/lists", "var/cache/apt", "etc/hostname", "etc/resolv.conf"):
        remove(rootfs / rel)
    for pattern in ("var/cache/debconf/*-old", "var/lib/dpkg/*-old", "tmp/*", "root/.cache"):
        for path in rootfs.glob(pattern):
            remove(path)
    for path in (rootfs / "var/log").rglob("*"):
        if path.is_file() or path.is_symlink():
            path.unlink()
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    # Debian's python3.11 package alone has no "python3" command (the python3 package has);
    # the Dockerfile's scripts call python3.
    python3 = rootfs / "usr/bin/python3"
    if not python3.exists() and not python3.is_symlink():
        python3.symlink_to("python3.11")


def build_base(force: bool = False) -> tuple[Path, Descriptor]:
    """The Python base as an OCI layout folder in the cache; return it and its manifest."""
    key = hash_inputs([], BASE_SUITE, *BASE_PACKAGES, BASE_RECIPE, ",".join(BASE_EXCLUDE))[:16]
    home = CACHE / f"python-base-{key}"
    with locked(CACHE / "python-base.lock"):
        if force or not (home / ".complete").exists():
            _debootstrap_base(home)
    return home / "layout", index_manifest(home / "layout")


def _debootstrap_base(home: Path) -> None:
    """Build the base into ``home`` (through a ``.tmp`` sibling, renamed when complete)."""
    mirror = debian_mirror(BASE_SUITE)
    tmp = home.with_name(home.name + ".tmp")
    run(as_root(["rm", "-rf", tmp, home]))
    tmp.mkdir(parents=True)
    rootfs = tmp / "rootfs"
    log(f"debootstrap {BASE_SUITE} ({', '.join(BASE_PACKAGES)})")
    start = time.monotonic()
    run(
        as_root(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=" + ",".join(BASE_PACKAGES),
                BASE_SUITE,
                rootfs,
                mirror,
            ]
        ),
        stdout=subprocess.DEVNULL,
    )
    log(f"debootstrap took {time.monotonic() - start:.0f} s")
    slim(rootfs)
    layer = write_layer(tmp / "layout", rootfs, exclude=BASE_EXCLUDE)
    config = ImageConfig(
        env=(f"PATH={DEFAULT_PATH}", "LANG=C.UTF-8"),
        cmd=("python3",),
        labels={
            "org.opencontainers.image.title": "python",
            "org.opencontainers.image.description": (
                f"Python 3.11 from Debian {BASE_SUITE} packages (hack/images.py)"
            ),
        },
    )
    manifest = write_image(tmp / "layout", [layer], config, comment="debootstrap")
    write_index(tmp / "layout", manifest, [BASE_NAME])
    run(as_root(["rm", "-rf", rootfs]))
    (tmp / ".complete").touch()
    tmp.rename(home)
    log(f"base image {BASE_NAME}: {layer[0].size / 2**20:.0f} MiB compressed")
