"""`disttrain operator` as a background process of the local cluster, for jobs whose pods run on the
process node: `disttrain dev-cluster operator` starts it (README's quick start does, so the jobs a user
applies afterwards are served), `dev-cluster down` stops it with the cluster. On the real node the
operator is installed in the cluster instead (overlays/local-images), as users install it."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from disttrain.local.ports import free_port
from disttrain_dev import background
from disttrain_dev.polling import wait_for

RECORD = "operator.json"  # in the cluster's folder, beside state.json
LOG = Path("logs") / "operator.log"


@dataclass(frozen=True)
class LocalOperator:
    pid: int
    liveness_port: int

    @property
    def liveness_url(self) -> str:
        return f"http://127.0.0.1:{self.liveness_port}/healthz"


def running(folder: Path) -> LocalOperator | None:
    """The operator this cluster folder started, if its process is alive."""
    path = folder / RECORD
    if not path.is_file():
        return None
    found = LocalOperator(**json.loads(path.read_text()))
    return found if background.alive(found.pid) else None


def start(folder: Path, kubeconfig: Path) -> LocalOperator:
    """Start the operator for every namespace of the cluster whose kubeconfig is given, or find it running;
    waits until its liveness endpoint answers."""
    found = running(folder)
    if found is not None:
        return found
    port = free_port()
    command = [sys.executable, "-m", "disttrain_cli.main", "operator", "--all-namespaces"]
    command.append(f"--liveness=http://127.0.0.1:{port}/healthz")
    # a port of its own for metrics: the default (9090) stays free for an operator run by hand, or a test's
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "DISTTRAIN_METRICS_PORT": str(free_port())}
    started = LocalOperator(background.start(folder / LOG, command, env, cwd=folder), port)
    (folder / RECORD).write_text(json.dumps(asdict(started)) + "\n")

    def healthy() -> bool:
        if not background.alive(started.pid):
            tail = "\n".join((folder / LOG).read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"the operator exited; {folder / LOG} ends:\n{tail}")
        try:
            with urllib.request.urlopen(started.liveness_url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_for("the operator's liveness endpoint", healthy, timeout=60, interval=0.5)
    return started


def stop(folder: Path) -> None:
    """Stop the operator this cluster folder started, if any."""
    found = running(folder)
    if found is not None:
        background.stop(found.pid)
    (folder / RECORD).unlink(missing_ok=True)
