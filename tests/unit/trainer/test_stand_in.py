"""The stand-in speaks the trainer's contract, as local processes with TF_CONFIG: exact steps, a resume at the
step saved on SIGTERM, PREEMPTED and DIVERGED exit codes, the ParameterServer roles; no TensorFlow."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from disttrain_contract.exit_codes import ExitCode
from disttrain_trainer.lockstep import WINDOW
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


def _two_workers(tmp_path: Path, *args: str) -> tuple[LocalJob, str, str]:
    job = _job(tmp_path, {"Worker": 2}, "--epochs", "100", "--max-steps-per-second", "50", *args)
    first, second = job.processes
    for label in (first, second):
        job.start(label)
    return job, first, second


def _saved_at(output: str) -> int:
    (error,) = [line for line in output.splitlines() if "preempted: saved at step" in line]
    return int(error.rsplit("step ", 1)[1].split()[0].strip('".,}'))


def test_one_signalled_worker_makes_both_leave_at_the_same_step_which_worker_0_saves(tmp_path: Path) -> None:
    job, first, second = _two_workers(tmp_path, "--checkpoint-every", "100000")
    try:
        job.wait_for_step(20, timeout=30)
        job.kill(second, signal.SIGTERM)
        assert (job.running[second].returncode, job.wait(first, timeout=30)) == (ExitCode.PREEMPTED,) * 2
    finally:
        job.stop_all()
    assert _saved_at(job.output(first)) == _saved_at(job.output(second)) == job.saved_step() >= 20


def test_a_worker_gone_fails_its_peer_and_both_started_again_resume_and_finish(tmp_path: Path) -> None:
    job, first, second = _two_workers(tmp_path, "--checkpoint-every", "10")
    try:
        job.wait_for_step(20, timeout=30)
        job.kill(second)
        job.start(second)  # at once, as a restart in place starts it: beside its peer's old run, which it waits out
        assert job.wait(first, timeout=30) == ExitCode.PEER_LOST
        assert "a peer was lost" in job.output(first)
        saved = job.saved_step()
        job.start(first)
        job.wait_for_step(saved + 20, timeout=30)
        job.running[first].send_signal(signal.SIGTERM)
        assert [job.wait(label, timeout=30) for label in (first, second)] == [ExitCode.PREEMPTED] * 2
    finally:
        job.stop_all()
    assert events(job.output(second), "restored")[0]["step"] == saved


def test_a_frozen_worker_holds_its_peer_in_place_until_it_runs_again(tmp_path: Path) -> None:
    job, first, second = _two_workers(tmp_path)
    try:
        job.wait_for_step(10, timeout=30)
        job.running[second].send_signal(signal.SIGSTOP)
        held = job.wait_for_step(1, timeout=5)
        time.sleep(1.5)  # as long as a lost peer takes to fail the step
        assert job.running[first].poll() is None and job.progress()["step"] <= held + WINDOW + 10
        job.running[second].send_signal(signal.SIGCONT)
        job.wait_for_step(held + 2 * 10 + WINDOW, timeout=30)
    finally:
        job.stop_all()
