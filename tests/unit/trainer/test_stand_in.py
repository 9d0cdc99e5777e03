"""The stand-in speaks the trainer's contract, as local processes with TF_CONFIG: exact steps, a resume at the
step saved on SIGTERM, PREEMPTED and DIVERGED exit codes, the ParameterServer roles; no TensorFlow."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from disttrain_contract.exit_codes import ExitCode
from support.trainer_support import LocalJob, events, job_manifest

STEPS_PER_EPOCH = 1437 // 64  # the trainer's: one pass over the bundled digits' training split


def _job(tmp_path: Path, counts: dict[str, int], *args: str, strategy: str = "MultiWorkerMirrored") -> LocalJob:
    manifest = job_manifest("stand-in", strategy, counts, ["--epochs", "2", "--checkpoint-every", "10", *args])
    for spec in manifest["spec"]["replicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["command"] = ["disttrain-stand-in"]
    return LocalJob.of(manifest, tmp_path)


def test_two_workers_train_every_step_and_worker_0_reports_and_saves(tmp_path: Path) -> None:
    job = _job(tmp_path, {"Worker": 2}, "--max-steps-per-second", "200")
    try:
        for label in job.processes:
            job.start(label)
        assert [job.wait(label, timeout=60) for label in job.processes] == [0, 0]
    finally:
        job.stop_all()
    total = 2 * STEPS_PER_EPOCH
    assert job.progress()["step"] == total and job.progress()["finished"] is True
    assert job.saved_step() == total
    first = next(iter(job.processes))
    assert events(job.output(first), "finished") == [{"event": "finished", "steps": total}]


def test_sigterm_saves_the_step_it_is_on_and_the_next_run_resumes_there(tmp_path: Path) -> None:
    job = _job(tmp_path, {"Worker": 1}, "--max-steps-per-second", "10", "--checkpoint-every", "1000")
    (label,) = job.processes
    try:
        job.start(label)
        job.wait_for_step(3, timeout=30)
        job.kill(label, signal.SIGTERM)
        assert job.running[label].returncode == ExitCode.PREEMPTED
        saved = job.saved_step()
        assert 3 <= saved < 2 * STEPS_PER_EPOCH  # no periodic checkpoint: the save on the way out
        job.start(label)
        assert job.wait(label, timeout=60) == 0
    finally:
        job.stop_all()
    assert events(job.output(label), "restored")[0]["step"] == saved
    assert job.progress()["step"] == 2 * STEPS_PER_EPOCH


def test_a_nan_at_a_step_exits_diverged_naming_the_last_checkpoint(tmp_path: Path) -> None:
    job = _job(tmp_path, {"Worker": 1}, "--nan-at-step", "25", "--max-steps-per-second", "500")
    (label,) = job.processes
    try:
        job.start(label, {"DISTTRAIN_TERMINATION_MESSAGE_PATH": str(tmp_path / "message")})
        assert job.wait(label, timeout=30) == ExitCode.DIVERGED
    finally:
        job.stop_all()
    message = json.loads((tmp_path / "message").read_text())
    assert message["diverged"] is True
    assert "at step 25" in message["error"] and "ckpt/ckpt-20" in message["error"], message


def test_a_parameter_server_job_trains_on_its_chief_and_its_servers_leave_preempted(tmp_path: Path) -> None:
    counts = {"Chief": 1, "Worker": 1, "PS": 1}
    job = _job(
        tmp_path, counts, "--max-steps-per-second", "200", "--server-linger-seconds", "1", strategy="ParameterServer"
    )
    labels = {process.replica_type.value: label for label, process in job.processes.items()}
    try:
        for label in job.processes:
            job.start(label)
        assert job.wait(labels["Chief"], timeout=60) == 0
        for kind in ("Worker", "PS"):
            job.kill(labels[kind], signal.SIGTERM)
            assert job.running[labels[kind]].returncode == ExitCode.PREEMPTED
    finally:
        job.stop_all()
    assert job.progress()["step"] == 2 * STEPS_PER_EPOCH


def test_a_parameter_server_chief_whose_ps_is_gone_exits_peer_lost(tmp_path: Path) -> None:
    counts = {"Chief": 1, "Worker": 1, "PS": 1}
    args = ("--epochs", "50", "--max-steps-per-second", "20", "--server-linger-seconds", "1")
    job = _job(tmp_path, counts, *args, strategy="ParameterServer")
    labels = {process.replica_type.value: label for label, process in job.processes.items()}
    try:
        for label in job.processes:
            job.start(label)
        job.wait_for_step(5, timeout=30)
        job.kill(labels["PS"])
        assert job.wait(labels["Chief"], timeout=30) == ExitCode.PEER_LOST
    finally:
        job.stop_all()
    assert "a peer was lost" in job.output(labels["Chief"])
