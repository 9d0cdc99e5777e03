"""The operator's start: what it cannot do (a port that is taken, no cluster to reach) stops it at once,
with the reason, rather than leaving it up with its liveness probe failing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from disttrain.local.ports import free_port
from disttrain_cli.operator_command import run_operator


def test_a_metrics_port_that_is_taken_stops_the_operator_before_it_starts_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))  # the operator serves metrics on every address
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setenv("DISTTRAIN_METRICS_PORT", str(port))
        with pytest.raises(SystemExit) as stopped:
            run_operator(["--namespace", "team-a"])
    reason = "Address already in use"
    assert stopped.value.code == f"error: cannot serve metrics on port {port} (DISTTRAIN_METRICS_PORT): {reason}"


def test_no_cluster_to_reach_stops_the_operator_with_the_reason(tmp_path: Path) -> None:
    """kopf's start-up is tried again only after an API error: a kubeconfig that is not there stops it."""
    missing = tmp_path / "kubeconfig"
    environment = {**os.environ, "KUBECONFIG": str(missing), "DISTTRAIN_METRICS_PORT": str(free_port())}
    command = [
        sys.executable,
        "-m",
        "disttrain_cli.main",
        "operator",
        f"--liveness=http://127.0.0.1:{free_port()}/healthz",
    ]
    finished = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=30, check=False)
    assert finished.returncode == 1
    assert f"kubeconfig {missing}" in finished.stdout + finished.stderr
