"""The real node's shims that outlive its containerd are stopped with the cluster, and no other node's."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from disttrain_dev.containerd import stop_shims
from disttrain_dev.real_node import NodeFiles


def _shim(socket: Path) -> subprocess.Popen[bytes]:
    """A process that names itself as containerd's runc shim does, serving `socket`'s containerd."""
    idle = "import time; time.sleep(60)"
    command = f"exec -a containerd-shim-runc-v2 {sys.executable} -c '{idle}' -namespace k8s.io -address {socket}"
    return subprocess.Popen(["bash", "-c", command])


def test_only_the_shims_of_this_node_s_containerd_are_stopped(tmp_path: Path) -> None:
    ours, theirs = NodeFiles(tmp_path / "ours"), NodeFiles(tmp_path / "theirs")
    left, other = _shim(ours.containerd_socket), _shim(theirs.containerd_socket)
    try:
        for _ in range(100):  # until each has become the shim it names itself
            names = [Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0", 1)[0] for p in (left, other)]
            if all(b"containerd-shim" in name for name in names):
                break
            time.sleep(0.05)
        stop_shims(ours)
        assert left.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for process in (left, other):
            process.kill()
            process.wait()
