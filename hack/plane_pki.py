"""The local plane's certificates and kubeconfigs, made with the openssl command: the cluster's
CA and one certificate per identity (each component, the admin, the real node's kubelet), the
front proxy's CA for the aggregation layer, the service-account signing key, and a kubeconfig
per identity with everything embedded. Each file is made once and kept: a second ``up`` reuses
what the running components and the kubeconfigs hold.

Standard library only (hack/doctor.py imports hack/localplane.py before any virtualenv).
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import node


def _openssl(*args: str) -> None:
    subprocess.run(
        ["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def make_ca(pki: Path, name: str = "ca", subject: str = "/CN=opsuite-local-ca") -> None:
    """Create a CA in ``pki``: the cluster's (``ca``, also signing kwok's serving certificate),
    or the front proxy's, which the API server's aggregation layer authenticates to aggregated
    API servers with."""
    if (pki / f"{name}.crt").exists():
        return
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("genrsa", "-out", str(pki / f"{name}.key"), "2048")
    _openssl(
        "req",
        "-x509",
        "-new",
        "-nodes",
        "-key",
        str(pki / f"{name}.key"),
        "-sha256",
        "-days",
        "3650",
        "-subj",
        subject,
        "-out",
        str(pki / f"{name}.crt"),
    )


def make_cert(
    pki: Path, name: str, subject: str, *, server_sans: list[str] | None = None, ca: str = "ca"
) -> None:
    """Issue a client (or, with SANs, serving) certificate in ``pki`` signed by its CA ``ca``."""
    crt, key, csr, ext = (pki / f"{name}.{s}" for s in ("crt", "key", "csr", "ext"))
    if crt.exists():
        return
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    lines = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment"]
    if server_sans:
        lines.append("extendedKeyUsage=serverAuth,clientAuth")
        lines.append("subjectAltName=" + ",".join(server_sans))
    else:
        lines.append("extendedKeyUsage=clientAuth")
    ext.write_text("\n".join(lines) + "\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(pki / f"{ca}.crt"),
        "-CAkey",
        str(pki / f"{ca}.key"),
        "-CAcreateserial",
        "-days",
        "3650",
        "-sha256",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    csr.unlink()
    ext.unlink()


def make_pki(pki: Path) -> None:
    """All certificates and keys the plane needs, in ``pki`` (idempotent)."""
    make_ca(pki)
    sans = [
        "IP:127.0.0.1",
        "IP:10.96.0.1",
        f"IP:{node.NODE_IP}",
        "DNS:localhost",
        "DNS:kubernetes",
        "DNS:kubernetes.default",
        "DNS:kubernetes.default.svc",
        "DNS:kubernetes.default.svc.cluster.local",
    ]
    make_cert(pki, "apiserver", "/CN=kube-apiserver", server_sans=sans)
    make_cert(pki, "admin", "/O=system:masters/CN=kubernetes-admin")
    make_cert(pki, "controller-manager", "/CN=system:kube-controller-manager")
    make_cert(pki, "scheduler", "/CN=system:kube-scheduler")
    # kwok updates the status of every node and pod it fakes: it runs with admin rights, as
    # kwokctl does.
    make_cert(pki, "kwok", "/O=system:masters/CN=kwok-controller")
    make_cert(pki, "kubelet", f"/O=system:nodes/CN=system:node:{node.NODE_NAME}")
    make_cert(pki, "kube-proxy", "/CN=system:kube-proxy")
    # CoreDNS reads Services, EndpointSlices, namespaces and pods cluster-wide (kubeadm's
    # system:coredns role); bound by hack/localplane.py when CoreDNS starts.
    make_cert(pki, "coredns", "/CN=system:coredns")
    # The aggregation layer (APIServices such as OLM's packageserver): the API server proxies
    # to them as front-proxy-client, certified by a CA of its own, as kubeadm sets it up.
    make_ca(pki, "front-proxy-ca", "/CN=opsuite-front-proxy-ca")
    make_cert(pki, "front-proxy-client", "/CN=front-proxy-client", ca="front-proxy-ca")
    kwok_sans = ["IP:127.0.0.1", "DNS:localhost"]
    make_cert(pki, "kwok-serving", "/CN=kwok-serving", server_sans=kwok_sans)
    if not (pki / "sa.key").exists():
        _openssl("genrsa", "-out", str(pki / "sa.key"), "2048")
        _openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def write_kubeconfig(path: Path, pki: Path, user: str, server: str) -> None:
    """A kubeconfig for the identity ``user`` (its certificate in ``pki``) at ``server``,
    certificates embedded so it works from anywhere."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "opsuite-local",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": b64(pki / "ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": b64(pki / f"{user}.crt"),
                    "client-key-data": b64(pki / f"{user}.key"),
                },
            }
        ],
        "contexts": [
            {"name": "opsuite-local", "context": {"cluster": "opsuite-local", "user": user}}
        ],
        "current-context": "opsuite-local",
    }
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    path.chmod(0o600)
