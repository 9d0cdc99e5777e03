"""The process node's log endpoint: which file, and how much of it (the HTTPS round trip runs in
tests/integration/test_process_node.py, through the API server)."""

from __future__ import annotations

import os
from pathlib import Path

from disttrain_dev.node_logs import find_log, previous_log, select


def test_tail_then_limit_as_the_kubelet_cuts() -> None:
    data = b"one\ntwo\nthree\n"
    assert select(data, None, None) == data
    assert select(data, 2, None) == b"two\nthree\n"
    assert select(data, 0, None) == b""
    assert select(data, 2, 5) == b"two\nt"
    assert select(data, 10, None) == data


def test_the_newest_pod_of_a_name_is_read(tmp_path: Path) -> None:
    for uid, mtime in (("old", 1_000), ("new", 2_000)):
        folder = tmp_path / f"ns_job-worker-0_{uid}"
        folder.mkdir()
        (folder / "tensorflow.log").write_text(uid)
        os.utime(folder / "tensorflow.log", (mtime, mtime))
    found = find_log(tmp_path, "ns", "job-worker-0", "tensorflow")
    assert found is not None and found.read_text() == "new"
    assert find_log(tmp_path, "ns", "job-worker-1", "tensorflow") is None
    assert find_log(tmp_path, "ns", "job-worker-0", "sidecar") is None


def test_a_restarted_container_s_last_run_is_kept_beside_its_log() -> None:
    assert previous_log(Path("pods/ns_p_u/tensorflow.log")) == Path("pods/ns_p_u/tensorflow.previous.log")
