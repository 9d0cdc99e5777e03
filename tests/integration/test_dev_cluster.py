"""`disttrain dev-cluster`: a second, separate cluster comes up, is reused, and goes away completely."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cluster_support import Cluster


def _cli(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DISTTRAIN_DEVCLUSTER_DIR": str(state)}
    command = [sys.executable, "-m", "disttrain_cli.main", "dev-cluster", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_is_idempotent_and_down_removes_everything(cluster: Cluster, tmp_path: Path) -> None:
    state = tmp_path / "second-cluster"
    assert _cli(state, "kubeconfig").returncode == 1

    first = _cli(state, "up")
    assert first.returncode == 0, first.stderr
    kubeconfig = state / "kubeconfig"
    assert first.stdout == f"{kubeconfig}\n" and kubeconfig.is_file()  # the result alone: scripts read it
    pids = json.loads((state / "state.json").read_text())["pids"]
    assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

    started = time.monotonic()
    again = _cli(state, "up")
    assert again.returncode == 0
    assert again.stdout == f"{kubeconfig}\n"
    assert json.loads((state / "state.json").read_text())["pids"] == pids  # reused, not restarted
    assert time.monotonic() - started < 30
    assert _cli(state, "kubeconfig").stdout.strip() == str(kubeconfig)

    second = Cluster(kubeconfig)
    nodes = second.items("nodes", "")
    assert len(nodes) == 4
    assert all(node["status"]["allocatable"]["nvidia.com/gpu"] == "8" for node in nodes)
    assert second.get("crd", "disttrainjobs.disttrain.io", "default") is not None

    assert _cli(state, "down").returncode == 0
    assert not state.exists()
    assert not any(_alive(pid) for pid in pids.values())
