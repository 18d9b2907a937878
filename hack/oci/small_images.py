"""The images made from a few files, with no package manager: busybox (from the machine's
Debian busybox-static) with the stand-ins the e2e tests and benchmarks name, and the pod
sandbox image ``registry.k8s.io/pause`` compiled from ``hack/image/pause.c``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from oci.archive import archive_layout
from oci.layer import write_layer
from oci.layout import ImageConfig, write_image
from oci.workspace import (
    LOCAL,
    OUT,
    ROOT,
    TOOLCHAIN,
    Built,
    fresh,
    hash_inputs,
    log,
    run,
    write_stamp,
)

BUSYBOX_NAMES = ["busybox:1.37", "busybox:latest"]
# Images the e2e tests and benchmarks name for pods but need only as "something that runs":
# busybox, with a command that waits and stops at once on SIGTERM (nginx), or a shell (alpine).
STANDINS: dict[str, tuple[list[str], ImageConfig]] = {
    "nginx": (
        ["nginx:latest", "nginx:1.27"],
        ImageConfig(
            cmd=("sh", "-c", "trap 'exit 0' TERM INT; sleep 2147483647 & wait"),
            labels={"opsuite.dev/stand-in": "busybox waiting for SIGTERM, not nginx"},
        ),
    ),
    "alpine": (
        ["alpine:latest", "alpine:3"],
        ImageConfig(cmd=("sh",), labels={"opsuite.dev/stand-in": "busybox, not alpine"}),
    ),
}
BUSYBOX_BINARY = Path("/bin/busybox")
PAUSE_NAMES = ["registry.k8s.io/pause:3.10.2"]


def busybox_rootfs(rootfs: Path) -> None:
    """A busybox tree: the static binary, a link for every applet, passwd and group files."""
    binary = rootfs / "bin/busybox"
    binary.parent.mkdir(parents=True)
    shutil.copy2(BUSYBOX_BINARY, binary)
    applets = run([BUSYBOX_BINARY, "--list-full"], capture_output=True).stdout.split()
    for applet in applets:
        link = rootfs / applet
        if link == binary:
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to("/bin/busybox")
    for d in ("etc", "root", "home", "var/spool/mail", "usr/sbin"):
        (rootfs / d).mkdir(parents=True, exist_ok=True)
    (rootfs / "root").chmod(0o700)
    tmp = rootfs / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    (rootfs / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
    )
    (rootfs / "etc/group").write_text("root:x:0:\nnogroup:x:65534:\n")


def build_busybox(force: bool = False) -> list[Built]:
    """busybox and the stand-ins, from one layer."""
    inputs = hash_inputs([BUSYBOX_BINARY, TOOLCHAIN])[:16]
    archives = {"busybox": OUT / "busybox.tar"} | {n: OUT / f"{n}.tar" for n in STANDINS}
    stamp = OUT / ".stamps/busybox"
    built = [Built(archives["busybox"], BUSYBOX_NAMES)]
    built += [Built(archives[n], names) for n, (names, _) in STANDINS.items()]
    if not force and fresh(stamp, inputs, archives.values()):
        return built
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs, layout = Path(tmp) / "rootfs", Path(tmp) / "layout"
        busybox_rootfs(rootfs)
        layer = write_layer(layout, rootfs, mtime=0)
        base_cfg = ImageConfig(cmd=("sh",))
        manifest = write_image(layout, [layer], base_cfg)
        archive_layout(layout, archives["busybox"], manifest, BUSYBOX_NAMES)
        for name, (names, cfg) in STANDINS.items():
            archive_layout(layout, archives[name], write_image(layout, [layer], cfg), names)
    write_stamp(stamp, inputs)
    log(f"busybox: {archives['busybox'].stat().st_size / 2**20:.1f} MiB")
    return built


def build_pause(force: bool = False) -> list[Built]:
    source = ROOT / "hack/image/pause.c"
    archive = OUT / "pause.tar"
    inputs = hash_inputs([source, TOOLCHAIN])[:16]
    stamp = OUT / ".stamps/pause"
    built = [Built(archive, PAUSE_NAMES)]
    if not force and fresh(stamp, inputs, [archive]):
        return built
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs, layout = Path(tmp) / "rootfs", Path(tmp) / "layout"
        rootfs.mkdir()
        cc = os.environ.get("CC", "gcc")
        run([cc, "-static", "-Os", "-s", "-Wall", "-Wextra", "-o", rootfs / "pause", source])
        layer = write_layer(layout, rootfs, mtime=0)
        # The upstream image's user: 65535 (no passwd needed, numeric).
        config = ImageConfig(entrypoint=("/pause",), user="65535:65535")
        archive_layout(layout, archive, write_image(layout, [layer], config), PAUSE_NAMES)
    write_stamp(stamp, inputs)
    log(f"pause: {archive.stat().st_size / 2**10:.0f} KiB")
    return built
