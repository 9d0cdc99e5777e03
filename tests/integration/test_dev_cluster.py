"""`disttrain dev-cluster`: a second, separate cluster comes up, is reused, runs an operator in the background,
and goes away completely, the operator with it; a namespace still being deleted is made anew once it went."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from disttrain_dev.background import alive
from disttrain_dev.polling import wait_for
from support.kube_cluster import Cluster


def _cli(state: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    """`disttrain dev-cluster ARGS` on the cluster whose state is in `state`; None: the suite's own."""
    env = {**os.environ, **({"DISTTRAIN_DEVCLUSTER_DIR": str(state)} if state else {})}
    command = [sys.executable, "-m", "disttrain_cli.main", "dev-cluster", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)


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

    # no node runs pods here: a namespace must name one, and says why where it does not
    refused = _cli(state, "namespace", "nowhere")
    assert refused.returncode == 1 and "runs neither the real node nor the process node" in refused.stderr

    # the operator in the background (the quick start's on the process node): started once, stopped by down
    launched = _cli(state, "operator")
    assert launched.returncode == 0, launched.stderr
    operator = json.loads((state / "operator.json").read_text())
    assert f"(pid {operator['pid']})" in launched.stderr and alive(operator["pid"])
    assert _cli(state, "operator").returncode == 0
    assert json.loads((state / "operator.json").read_text()) == operator  # found running, not started again

    assert _cli(state, "down").returncode == 0
    assert not state.exists()
    assert not any(alive(pid) for pid in [*pids.values(), operator["pid"]])


HOLD = "disttrain.io/test-hold"


def test_a_namespace_still_being_deleted_is_waited_for_and_made_anew(cluster: Cluster) -> None:
    """`dev-cluster namespace NAME` just after `kubectl delete namespace NAME` (the quick start run again after
    its namespace was deleted): nothing can be made in a namespace being deleted, so the command waits until
    the old one went, and the new one takes objects."""
    name = f"again-{uuid.uuid4().hex[:6]}"
    assert _cli(None, "namespace", name, "--node", "process").returncode == 0
    cluster.kubectl("create", "configmap", "held", "-n", name)

    def hold(finalizers: list[str] | None) -> None:  # a ConfigMap that stays keeps its namespace deleting
        patch = json.dumps({"metadata": {"finalizers": finalizers}})
        cluster.kubectl("patch", "configmap", "held", "-n", name, "--type=merge", "-p", patch)

    hold([HOLD])
    old = cluster.get("namespace", name, "default")
    assert old is not None
    cluster.kubectl("delete", "namespace", name, "--wait=false")
    wait_for(
        "the namespace controller deleting what the namespace holds",
        lambda: (cluster.get("configmap", "held", name) or {}).get("metadata", {}).get("deletionTimestamp"),
        60,
    )
    releasing = threading.Timer(3, hold, [None])
    releasing.start()
    try:
        again = _cli(None, "namespace", name, "--node", "process")
    finally:
        releasing.join()
    assert again.returncode == 0, again.stderr
    made = cluster.get("namespace", name, "default")
    assert made is not None and made["metadata"]["uid"] != old["metadata"]["uid"]
    assert "deletionTimestamp" not in made["metadata"]
    cluster.kubectl("create", "configmap", "new", "-n", name)
    cluster.delete_namespace(name)
