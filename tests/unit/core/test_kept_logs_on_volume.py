"""Logs kept on the checkpoint volume, in pure code: what a pod is told (and not: no finalizer), what is
refused without a volume, the pod that reads them back, the names attempts are kept under, and the
trainer's own bounded copy of everything it prints, fd-level output included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from disttrain_contract.kept_logs import (
    LOG_DIR_ENV,
    LOG_MAX_BYTES_ENV,
    POD_UID_ENV,
    attempt_file_name,
    parse_attempt_file_name,
)
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import MAX_LOG_BYTES, ReplicaType
from disttrain_core.api.validation import InvalidManifestError, validated
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.log_reader_pod import READER_OF_LABEL, SCRIPT, reader_pod
from disttrain_core.builders.objects import pod
from disttrain_core.kept_logs import KEPT_ATTEMPTS_PER_REPLICA
from disttrain_trainer.log_copy import BoundedFile
from support.job_builder import JobBuilder

ON_VOLUME = {"destination": "CheckpointVolume", "maxBytesPerAttempt": 4096}


def _manifest(logs: dict[str, Any], checkpoint: bool = True) -> dict[str, Any]:
    container = {"image": "registry.example/trainer:1", "resources": {"limits": {"gpu": 1}}}
    builder = JobBuilder("mnist", "team").metadata(uid="0123456789ab").spec(logs=logs)
    builder.workers(2, container, pod={"securityContext": {"runAsUser": 1000}})
    return builder.spec(**({"checkpoint": {"size": "1Gi", "mountPath": "/ckpt"}} if checkpoint else {})).obj()


def _python(program: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", program, *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_pod_is_told_where_to_keep_its_log_on_the_volume_and_holds_no_finalizer() -> None:
    job = DistTrainJob.model_validate(_manifest(ON_VOLUME))
    worker = pod(job, ReplicaType.WORKER, 1, BuildSettings())
    assert "finalizers" not in worker["metadata"]
    assert not any(key.startswith("disttrain.io/log") for key in worker["metadata"].get("annotations") or {})
    env = {entry["name"]: entry for entry in worker["spec"]["containers"][0]["env"]}
    assert env[LOG_DIR_ENV]["value"] == "/ckpt/logs/mnist-01234567/worker-1"
    assert env[LOG_MAX_BYTES_ENV]["value"] == "4096"
    assert env[POD_UID_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    unkept = DistTrainJob.model_validate(_manifest({**ON_VOLUME, "keep": False}))
    names = {
        entry["name"] for entry in pod(unkept, ReplicaType.WORKER, 1, BuildSettings())["spec"]["containers"][0]["env"]
    }
    assert LOG_DIR_ENV not in names


def test_logs_on_the_volume_without_a_volume_are_refused_with_why() -> None:
    with pytest.raises(InvalidManifestError, match=r"logs\.destination CheckpointVolume needs a checkpoint volume"):
        validated(_manifest(ON_VOLUME, checkpoint=False))
    validated(_manifest({**ON_VOLUME, "keep": False}, checkpoint=False))
    validated(_manifest({}, checkpoint=False))


def test_the_reader_pod_mounts_the_claim_read_only_as_a_restricted_pod_the_operator_ignores() -> None:
    job = DistTrainJob.model_validate(_manifest(ON_VOLUME))
    reader = reader_pod(job, "worker-1", "mnist-read-logs-abc")
    metadata, spec = reader["metadata"], reader["spec"]
    assert metadata["labels"] == {READER_OF_LABEL: "mnist"}  # no job-name label: not one of the job's pods
    assert metadata["ownerReferences"][0]["uid"] == "0123456789ab"
    assert not metadata["ownerReferences"][0]["controller"]
    (container,) = spec["containers"]
    assert container["image"] == "registry.example/trainer:1"
    assert container["command"][-2:] == ["/ckpt/logs/mnist-01234567/worker-1", str(KEPT_ATTEMPTS_PER_REPLICA)]
    assert "gpu" not in str(container["resources"])  # the job's own requests are not the reader's
    assert container["volumeMounts"] == [{"name": "disttrain-checkpoint", "mountPath": "/ckpt", "readOnly": True}]
    assert spec["volumes"][0]["persistentVolumeClaim"] == {"claimName": "mnist-checkpoint", "readOnly": True}
    assert spec["securityContext"]["runAsUser"] == 1000 and spec["securityContext"]["runAsNonRoot"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert (spec["restartPolicy"], spec["automountServiceAccountToken"]) == ("Never", False)


def test_the_reader_script_prints_each_attempt_file(tmp_path: Path) -> None:
    first = attempt_file_name(datetime(2026, 11, 25, 12, 0, tzinfo=UTC), "uid-1")
    second = attempt_file_name(datetime(2026, 11, 25, 12, 5, tzinfo=UTC), "uid-2")
    (tmp_path / first).write_text("first attempt\n")
    (tmp_path / second).write_bytes(b"bad \xff byte\n")
    (tmp_path / "notes.txt").write_text("not an attempt")
    printed = [json.loads(line) for line in _python(SCRIPT, str(tmp_path), "4").stdout.splitlines()]
    assert [(item["file"], item["number"], item["text"]) for item in printed] == [
        (first, 1, "first attempt\n"),
        (second, 2, "bad \ufffd byte\n"),
    ]
    assert _python(SCRIPT, str(tmp_path / "none"), "4").stdout == ""


def test_the_reader_prints_the_first_and_latest_attempts_whole_and_stays_below_a_log_rotation(
    tmp_path: Path,
) -> None:
    names = [attempt_file_name(datetime(2026, 11, 25, 12, minute, tzinfo=UTC), f"uid-{minute}") for minute in range(30)]
    for minute, name in enumerate(names):
        (tmp_path / name).write_text(f"attempt {minute + 1}\n" + "é\n" * (MAX_LOG_BYTES // 3))
    output = _python(SCRIPT, str(tmp_path), str(KEPT_ATTEMPTS_PER_REPLICA)).stdout
    printed = [json.loads(line) for line in output.splitlines()]
    assert [item["number"] for item in printed] == list(range(1, 31))  # every attempt is named, with its number
    whole = [item["number"] for item in printed if "text" in item]
    assert whole == [1, 28, 29, 30]
    assert len(output.encode()) < 10 * 1024 * 1024 // 2  # the kubelet rotates a container's log at 10 MiB


def test_attempt_files_sort_as_the_attempts_began_and_name_their_pod() -> None:
    earlier = attempt_file_name(datetime(2026, 11, 25, 9, 59, 59, 999999, tzinfo=UTC), "b-uid")
    later = attempt_file_name(datetime(2026, 11, 25, 10, 0, tzinfo=UTC), "a-uid")
    assert sorted([later, earlier]) == [earlier, later]
    assert parse_attempt_file_name(earlier) == (datetime(2026, 11, 25, 9, 59, 59, 999999, tzinfo=UTC), "b-uid")
    assert parse_attempt_file_name("notes.log") is None
    assert parse_attempt_file_name(earlier + ".1") is None


def test_a_bounded_file_keeps_at_least_the_last_half_of_its_bound_from_a_line(tmp_path: Path) -> None:
    lines = [f"line {number:03d}\n".encode() for number in range(60)]  # 9 bytes each
    small = BoundedFile(tmp_path / "small.log", max_bytes=100)
    for written, line in enumerate(lines, start=1):
        small.write(line)
        kept = (tmp_path / "small.log").read_bytes()
        assert len(kept) <= 100 and b"".join(lines[:written]).endswith(kept)
    assert len(kept) >= 50 - 9
    big = BoundedFile(tmp_path / "big.log", max_bytes=100)
    big.write(b"before\n")
    big.write(b"".join(lines))
    assert (tmp_path / "big.log").read_bytes() == b"".join(lines[49:])  # the last 100 bytes, from a line
    big.write(b"x" * 80 + b"\n")
    assert (tmp_path / "big.log").read_bytes() == b"".join(lines[-2:]) + b"x" * 80 + b"\n"  # 99 bytes
    big.close()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["big.log", "small.log"]  # no rewrite left over


PROGRAM = """
import os, sys, time
from disttrain_trainer import log_copy
copy = log_copy.from_environment()
print("from print")
os.write(1, b"one line, ")
time.sleep(0.2)  # the copy reads the unfinished line before a whole line comes on the other stream
sys.stderr.write("from stderr\\n")
sys.stderr.flush()
time.sleep(0.2)
os.write(1, b"in two writes\\n")
os.write(2, b"from fd 2, as TensorFlow's C++ logs\\n")
sys.stdout.flush(); sys.stderr.flush()
copy.finish()
os._exit(3)
"""


def test_the_trainer_copies_all_it_prints_to_its_attempt_file_line_by_line_and_still_prints_it(tmp_path: Path) -> None:
    env = {
        **os.environ,
        LOG_DIR_ENV: str(tmp_path / "logs" / "worker-0"),
        POD_UID_ENV: "pod-uid",
        LOG_MAX_BYTES_ENV: "4096",
    }
    ran = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 3
    assert ran.stdout == "from print\none line, in two writes\n"
    assert ran.stderr == "from stderr\nfrom fd 2, as TensorFlow's C++ logs\n"
    (kept,) = (tmp_path / "logs" / "worker-0").iterdir()
    assert parse_attempt_file_name(kept.name) is not None and kept.name.endswith("-pod-uid.log")
    assert sorted(kept.read_text().splitlines()) == sorted(
        ["from print", "one line, in two writes", "from stderr", "from fd 2, as TensorFlow's C++ logs"]
    )


def test_a_volume_that_cannot_be_written_costs_the_copy_not_the_program(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    env = {**os.environ, LOG_DIR_ENV: str(blocked / "worker-0")}
    program = "from disttrain_trainer import log_copy\nassert log_copy.from_environment() is None\nprint('trained')"
    ran = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert (ran.returncode, ran.stdout) == (0, "trained\n")
    assert "no log copy on the checkpoint volume" in ran.stderr
