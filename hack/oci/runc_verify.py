"""An operator image run as a cluster would run it, without one: its entrypoint with ``--help``
under runc, as the image's user (UID 65532, no passwd entry), on a read-only root filesystem
with no network."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from oci.archive import unpack_image
from oci.workspace import BIN, LOCAL, as_root, log, run


def verify_operator(archive: Path, target: str) -> None:
    """Run ``target``'s image from ``archive``; exit 1 unless it prints its usage."""
    runc = BIN / "runc"
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        bundle = Path(tmp)
        rootfs = bundle / "rootfs"
        rootfs.mkdir()
        image = unpack_image(archive, rootfs)["config"]
        run([runc, "spec"], cwd=bundle)
        spec = json.loads((bundle / "config.json").read_text())
        uid, _, gid = image.get("User", "0:0").partition(":")
        spec["process"].update(
            terminal=False,
            args=[*image.get("Entrypoint", []), "--help"],
            env=image.get("Env", []),
            cwd=image.get("WorkingDir") or "/",
            user={"uid": int(uid), "gid": int(gid or uid)},
        )
        spec["root"]["readonly"] = True
        (bundle / "config.json").write_text(json.dumps(spec))
        result = subprocess.run(
            as_root(
                [
                    runc,
                    "--root",
                    bundle / "state",
                    "run",
                    "--bundle",
                    bundle,
                    f"verify-{target}-{os.getpid()}",
                ]
            ),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        ok = result.returncode == 0 and result.stdout.startswith(f"usage: {target} ")
        log(f"{target} --help as {uid}:{gid} on a read-only root: {'ok' if ok else 'FAILED'}")
        if not ok:
            sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
            sys.exit(1)
