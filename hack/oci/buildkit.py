"""The operator images: the Dockerfile's targets built by a temporary ``buildkitd`` (OCI worker,
runc) on the Python base, passed as a named build context so that nothing is pulled. Each image
is named ``opsuite.local/<target>:dev`` and by a tag of its inputs' hash, so that a rebuilt
image gets a new tag and the Deployments using it roll."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

from oci.archive import archive_layout
from oci.debian_base import BASE_NAME
from oci.layout import Descriptor, index_manifest
from oci.workspace import (
    BIN,
    CACHE,
    LOCAL,
    OUT,
    ROOT,
    Built,
    as_root,
    fresh,
    hash_inputs,
    locked,
    log,
    run,
    write_stamp,
)

OPERATOR_REGISTRY = "opsuite.local"
# Bump when the build command below changes (part of the operator images' input hash).
OPERATOR_RECIPE = "1"
CA_BUNDLES = [Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pki/tls/certs/ca-bundle.crt")]


def operator_inputs(base: Descriptor) -> str:
    """A digest of everything the Dockerfile copies or runs, and of the base."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [ROOT / p["from"] / p["include"] for p in pyproject["tool"]["poetry"]["packages"]]
    paths = [
        ROOT / "Dockerfile",
        ROOT / ".dockerignore",
        ROOT / "pyproject.toml",
        ROOT / "poetry.lock",
        ROOT / "README.md",
        ROOT / "hack/image",
        *packages,
    ]
    return hash_inputs(paths, base.digest, OPERATOR_RECIPE)


@contextlib.contextmanager
def buildkitd(root: Path) -> Iterator[str]:
    """A temporary buildkitd (OCI worker, runc) on its own socket; yield its address. It is
    stopped when the block ends, however it ends."""
    sock_dir = Path(tempfile.mkdtemp(prefix="opsuite-buildkit-"))
    addr = f"unix://{sock_dir}/buildkitd.sock"
    root.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    cmd = as_root(
        [
            BIN / "buildkitd",
            "--root",
            root,
            "--addr",
            addr,
            "--oci-worker=true",
            "--containerd-worker=false",
            "--oci-worker-binary",
            (BIN / "runc").resolve(),
        ]
    )
    with (OUT / "buildkitd.log").open("w") as logfile:
        proc = subprocess.Popen(
            cmd, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _wait_for_workers(proc, addr, logfile.name)
            yield addr
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            shutil.rmtree(sock_dir, ignore_errors=True)


def _wait_for_workers(proc: subprocess.Popen[bytes], addr: str, logfile: str) -> None:
    """Until buildkitd at ``addr`` lists its workers (60 s at most, and not after it exited)."""
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"buildkitd exited ({proc.returncode}): see {logfile}")
        ready = subprocess.run(
            [str(BIN / "buildctl"), "--addr", addr, "debug", "workers"],
            capture_output=True,
        )
        if ready.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"buildkitd did not answer in 60 s: see {logfile}")
        time.sleep(0.2)


def build_operators(
    base_layout: Path, base: Descriptor, targets: Sequence[str], force: bool = False
) -> list[Built]:
    """The archives of ``targets``, each built unless its stamp says its inputs are unchanged."""
    inputs = operator_inputs(base)
    tag = inputs[:12]
    wanted = {
        t: Built(
            OUT / f"{t}.tar", [f"{OPERATOR_REGISTRY}/{t}:dev", f"{OPERATOR_REGISTRY}/{t}:{tag}"]
        )
        for t in targets
    }
    todo = [
        t for t in targets if force or not fresh(OUT / f".stamps/{t}", inputs, [wanted[t].archive])
    ]
    if not todo:
        return list(wanted.values())
    with locked(CACHE / "buildkit.lock"), buildkitd(CACHE / "buildkit") as addr:
        for target in todo:
            start = time.monotonic()
            _build_operator(addr, target, base_layout, base, wanted[target])
            write_stamp(OUT / f".stamps/{target}", inputs)
            size = wanted[target].archive.stat().st_size / 2**20
            log(f"{target}: {time.monotonic() - start:.0f} s, {size:.0f} MiB")
    return list(wanted.values())


def _build_operator(
    addr: str, target: str, base_layout: Path, base: Descriptor, image: Built
) -> None:
    """``buildctl build`` of one Dockerfile target, written as ``image``'s archive."""
    log(f"buildctl build --opt target={target}")
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        out = Path(tmp) / "layout"
        cmd = _buildctl_build(addr, target, base_layout, base, out)
        result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
        (OUT / f"{target}.build.log").write_text(result.stdout + result.stderr)
        if result.returncode != 0:
            sys.stderr.write(result.stderr[-6000:])
            raise RuntimeError(f"building {target} failed: see {OUT}/{target}.build.log")
        run(as_root(["chown", "-R", f"{os.getuid()}:{os.getgid()}", out]))
        manifest = index_manifest(out)
        manifest = Descriptor(
            manifest.media_type, manifest.digest, manifest.size, platform=manifest.platform
        )
        archive_layout(out, image.archive, manifest, image.names)


def _buildctl_build(
    addr: str, target: str, base_layout: Path, base: Descriptor, out: Path
) -> list[str | Path]:
    """The build of ``target`` into the OCI layout folder ``out``: the base bound to its name as
    a named context (never pulled), the machine's CA bundle as the optional secret ``ca``."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cmd: list[str | Path] = [
        BIN / "buildctl",
        "--addr",
        addr,
        "build",
        "--progress=plain",
        "--frontend",
        "dockerfile.v0",
        "--local",
        f"context={ROOT}",
        "--local",
        f"dockerfile={ROOT}",
        "--opt",
        f"target={target}",
        "--opt",
        f"build-arg:PYTHON_IMAGE={BASE_NAME}",
        "--opt",
        f"build-arg:VERSION={version}",
        "--oci-layout",
        f"base={base_layout}",
        "--opt",
        f"context:{BASE_NAME}=oci-layout://base@{base.digest}",
        "--output",
        f"type=oci,tar=false,dest={out}",
    ]
    ca = next((c for c in CA_BUNDLES if c.exists()), None)
    if ca is not None:
        cmd += ["--secret", f"id=ca,src={ca}"]
    return cmd
