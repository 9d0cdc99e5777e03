"""The local cluster's own certificate authority (the kubelet trusts it, and the API server presents a
client certificate of it when it calls the kubelet: logs, exec, port-forward), and the self-signed
serving pairs that controllers run as host processes need to start."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

CA = "ca"  # ca.crt, ca.key
CLIENT = "kubelet-client"  # the API server's: kubelet-client.crt, kubelet-client.key


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def write_serving_pair(folder: Path, common_name: str) -> None:
    """A self-signed tls.crt/tls.key where a controller's webhook or metrics server looks, unless one is
    there; nothing connects to it, as no webhook configuration names it. Written under a lock: two
    benchmarks may start their peers at once, and neither may read the other's pair half written."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "tls.crt").is_file() and (folder / "tls.key").is_file():
            return
        curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        keys = ["-keyout", str(folder / "tls.key"), "-out", str(folder / "tls.crt")]
        _openssl("req", "-x509", *curve, *keys, "-days", "3650", "-subj", f"/CN={common_name}")


def make_kubelet_client_certificate(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    ca, client = pki / CA, pki / CLIENT
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *curve,
        "-keyout",
        f"{ca}.key",
        "-out",
        f"{ca}.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=disttrain-dev-ca",
    )
    subject = "/O=system:masters/CN=kube-apiserver-kubelet-client"
    _openssl("req", *curve, "-keyout", f"{client}.key", "-out", f"{client}.csr", "-subj", subject)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{client}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{client}.crt",
        "-days",
        "3650",
    )
