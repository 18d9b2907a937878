"""``operator-sdk scorecard`` (basic and olm suites) on every bundle, on the plane's real node.

The scorecard runs each test of ``bundle/<package>/tests/scorecard/config.yaml`` in a pod: an
init container untars the bundle (from a ConfigMap) with ``tar``, then the test image's
``scorecard-test <test>`` reads it. Both images are built here, without Docker, from the pinned
operator-sdk module (``hack/build-tools.sh operator-sdk``): busybox (for ``tar``) and the
``scorecard-test`` binary, as upstream's scorecard-test image holds it (uid 1001). It is pushed
to the plane's registry as ``ghcr.io/opsuite/scorecard-test:<hash>`` (the real node's
containerd takes ghcr.io images from there), and each run uses a copy of the bundle's config
naming it instead of upstream's quay.io image. The namespace's pods go to the real node
(PodNodeSelector and PodTolerationRestriction annotations), under Pod Security "restricted".

Usage: python3 hack/scorecard.py [--namespace NS] [--wait SECONDS] (KUBECONFIG: default, the
local plane's). Each bundle's run is bounded by --wait (default 120 s); the three take about
30 s on the local plane.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import oci_push
import yaml
from oci.archive import archive_layout
from oci.layer import write_layer
from oci.layout import ImageConfig, write_image
from oci.small_images import busybox_rootfs
from oci.workspace import BIN, LOCAL, OUT, ROOT, hash_inputs, log

PUBLISHED = "ghcr.io/opsuite"
SCORECARD_TEST = BIN / "scorecard-test"
OPERATOR_SDK = BIN / "operator-sdk"
PLACEMENT = {
    "scheduler.alpha.kubernetes.io/node-selector": "opsuite.dev/real-node=true",
    "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps(
        [
            {
                "key": "opsuite.dev/real-node",
                "operator": "Equal",
                "value": "true",
                "effect": "NoSchedule",
            }
        ]
    ),
}
"""Namespace annotations that put its pods on the plane's real node."""


def build_image() -> tuple[Path, str]:
    """The scorecard-test image (busybox + /usr/local/bin/scorecard-test), named after its
    inputs."""
    inputs = hash_inputs([SCORECARD_TEST.resolve(), Path(__file__)])
    name = f"{PUBLISHED}/scorecard-test:{inputs[:12]}"
    archive = OUT / "scorecard-test.tar"
    with tempfile.TemporaryDirectory(dir=LOCAL) as tmp:
        rootfs = Path(tmp) / "rootfs"
        busybox_rootfs(rootfs)
        target = rootfs / "usr/local/bin/scorecard-test"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(SCORECARD_TEST.resolve().read_bytes())
        target.chmod(0o755)
        layout = Path(tmp) / "layout"
        layer = write_layer(layout, rootfs, mtime=0)
        # No entrypoint: the untar init container runs its args (``tar ...``) as the command,
        # the tests their config's (``scorecard-test <test>``).
        config = ImageConfig(user="1001")
        archive_layout(layout, archive, write_image(layout, [layer], config), [name])
    return archive, name


def local_config(bundle: Path, image: str) -> str:
    """The bundle's scorecard config with every test running ``image``."""
    config = yaml.safe_load((bundle / "tests" / "scorecard" / "config.yaml").read_text())
    for stage in config["stages"]:
        for test in stage["tests"]:
            test["image"] = image
    return yaml.safe_dump(config, sort_keys=False)


def namespace_manifest(namespace: str) -> str:
    """The scorecard's namespace, its pods placed on the real node."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "annotations": PLACEMENT},
        }
    )


def _kubectl(*args: str, stdin: str | None = None) -> None:
    subprocess.run([str(BIN / "kubectl"), *args], input=stdin, text=True, check=True)


def run(bundle: Path, image: str, namespace: str, wait: int) -> bool:
    """Run the scorecard on one bundle; print its results; whether every test passed."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as config:
        config.write(local_config(bundle, image))
        config.flush()
        done = subprocess.run(
            [
                str(OPERATOR_SDK),
                "scorecard",
                str(bundle),
                "--config",
                config.name,
                "--namespace",
                namespace,
                "--untar-image",
                image,
                "--pod-security",
                "restricted",
                "--wait-time",
                f"{wait}s",
                "--output",
                "text",
            ],
            text=True,
            capture_output=True,
            check=False,
        )
    print(done.stdout + done.stderr, flush=True)
    return done.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", default="opsuite-scorecard")
    parser.add_argument("--wait", type=int, default=120, help="seconds per bundle")
    args = parser.parse_args(argv)
    os.environ.setdefault("KUBECONFIG", str(LOCAL / "kubeconfig"))
    registry = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "localplane.py"), "registry"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive, image = build_image()
    oci_push.push(archive, image.replace(PUBLISHED, f"{registry}/opsuite", 1))
    log(f"pushed {image}")
    _kubectl("apply", "-f", "-", stdin=namespace_manifest(args.namespace))
    try:
        bundles = sorted(p for p in (ROOT / "bundle").iterdir() if p.is_dir())
        failed = [b.name for b in bundles if not run(b, image, args.namespace, args.wait)]
    finally:
        _kubectl("delete", "namespace", args.namespace, "--timeout=120s")
    if failed:
        print(f"scorecard failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"scorecard: basic and olm suites pass on {len(bundles)} bundles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
