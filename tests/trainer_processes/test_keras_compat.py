"""Users' own Keras code under MultiWorkerMirrored: `fit` works once patched, and the backup resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from disttrain.local.ports import free_port

TASK = Path(__file__).with_name("keras_fit_task.py")


def _run_pair(*args: str) -> list[subprocess.CompletedProcess[str]]:
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    children = []
    for index in range(2):
        tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config), "TF_CPP_MIN_LOG_LEVEL": "2"}
        command = [sys.executable, str(TASK), *args]
        children.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = []
    for child in children:
        output, _ = child.communicate(timeout=300)
        results.append(subprocess.CompletedProcess(child.args, child.returncode, output, ""))
    return results


def _line(output: str, prefix: str) -> list[str]:
    return next(line.split() for line in output.splitlines() if line.startswith(prefix))


def test_unpatched_fit_fails_under_multi_worker(tmp_path: Path) -> None:
    results = _run_pair(str(tmp_path / "backup"), "1", "unpatched")
    assert all(result.returncode != 0 for result in results)
    assert any("PerReplica" in result.stdout or "reduction dimension" in result.stdout for result in results)


def test_patched_fit_trains_identical_workers_and_resumes_from_the_backup(tmp_path: Path) -> None:
    backup = str(tmp_path / "backup")
    interrupted = _run_pair(backup, "10", "patched", "2")
    assert all("STOPPED after epoch 2" in result.stdout for result in interrupted), interrupted[0].stdout[-2000:]
    assert (tmp_path / "backup" / "latest.weights.h5").is_file()

    resumed = _run_pair(backup, "10", "patched")
    for result in resumed:
        assert result.returncode == 0, result.stdout[-3000:]
        assert _line(result.stdout, "EPOCHS")[1:] == ["8", "FIRST", "2"]  # epochs 3 to 10 only
    digests = {_line(result.stdout, "DIGEST")[1] for result in resumed}
    assert len(digests) == 1
    assert float(_line(resumed[0].stdout, "DIGEST")[3]) >= 0.9
