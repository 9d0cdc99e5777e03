"""The trainer with real TensorFlow processes: accuracy, agreement, exact resume, faults, devices, errors."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from disttrain.local.ports import free_port
from disttrain_contract.exit_codes import ExitCode
from disttrain_contract.progress import PROGRESS_PORT_ENV
from disttrain_core.progress import Report, parse_evaluation, parse_progress
from disttrain_dev.polling import wait_for
from disttrain_operator.progress_poller import fetch_progress
from support.repository import ROOT
from support.trainer_support import LocalJob, events, job_manifest, run_trainer

DIGITS_STEPS_PER_EPOCH = 1437 // 64  # the training split of the bundled digits at the default batch


def _local_run(manifest: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "disttrain_cli.main", "local", "run", str(manifest)]
    return subprocess.run(
        [*command, "--workdir", str(workdir)], capture_output=True, text=True, timeout=600, check=False
    )


def test_local_run_of_the_example_trains_two_identical_workers_to_90_percent(tmp_path: Path) -> None:
    result = _local_run(ROOT / "examples" / "local-multi-worker-digits.yaml", tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "[disttrain] job succeeded: worker-0 succeeded" in result.stdout
    finished = {
        line.split("]", 1)[0][1:]: json.loads(line.split("] ", 1)[1])
        for line in result.stdout.splitlines()
        if '"event": "finished"' in line
    }
    assert set(finished) == {"worker-0", "worker-1"}
    assert finished["worker-0"]["weights"] == finished["worker-1"]["weights"]
    assert finished["worker-0"]["accuracy"] >= 0.9
    total = 8 * DIGITS_STEPS_PER_EPOCH
    progress = json.loads((tmp_path / "checkpoints" / "progress.json").read_text())
    assert (progress["step"], progress["finished"]) == (total, True)
    assert set(progress) >= {"step", "epoch", "loss", "examplesPerSecond", "updateTime"}
    exported = tf.saved_model.load(str(tmp_path / "checkpoints" / "export"))
    logits = exported.signatures["serving_default"](inputs=tf.zeros((3, 8, 8, 1)))["logits"]
    assert logits.shape == (3, 10)


def test_multi_worker_killed_mid_run_resumes_at_the_saved_step(tmp_path: Path) -> None:
    epochs, every = 40, 20
    args = ["--epochs", str(epochs), "--checkpoint-every", str(every), "--log-every", "5", "--collective", "RING"]
    local = LocalJob.of(job_manifest("mwms", "MultiWorkerMirrored", {"Worker": 2}, args), tmp_path)
    total = epochs * DIGITS_STEPS_PER_EPOCH
    try:
        for label in ("worker-0", "worker-1"):
            local.start(label)
        local.wait_for_step(3 * every)
        local.kill("worker-1")
        assert local.wait("worker-0", timeout=120) == ExitCode.PEER_LOST, local.output("worker-0")
        saved = local.saved_step()
        assert 0 < saved < total

        for label in ("worker-0", "worker-1"):
            local.start(label)
        for label in ("worker-0", "worker-1"):
            assert local.wait(label) == 0, local.output(label)
        for label in ("worker-0", "worker-1"):
            # worker 0 holds the coordination service and may end first: no thread of a peer dies of it
            assert "Exception in thread" not in local.output(label), local.output(label)
            (restored,) = events(local.output(label), "restored")
            assert restored["step"] == saved
            (finished,) = events(local.output(label), "finished")
            assert finished["steps"] == total
        digests = {events(local.output(label), "finished")[0]["weights"] for label in ("worker-0", "worker-1")}
        assert len(digests) == 1
        assert local.progress()["step"] == total
    finally:
        local.stop_all()


def test_sigterm_saves_exits_preempted_and_the_rerun_finishes_exactly(tmp_path: Path) -> None:
    """Also the progress contract: served while training, left as termination message at each exit."""
    args = ["--epochs", "60", "--checkpoint-every", "1000", "--log-every", "5"]
    local = LocalJob.of(job_manifest("single", "MultiWorkerMirrored", {"Worker": 1}, args), tmp_path)
    total = 60 * DIGITS_STEPS_PER_EPOCH
    port = free_port()
    message = tmp_path / "worker-0.termination-message"
    try:
        local.start("worker-0", {PROGRESS_PORT_ENV: str(port)})
        local.wait_for_step(50)
        served = fetch_progress(f"http://127.0.0.1:{port}/progress")
        assert isinstance(served, Report) and (served.progress.step or 0) >= 50
        assert served.progress.total_steps == total
        local.kill("worker-0", signal.SIGTERM)
        assert local.running["worker-0"].returncode == ExitCode.PREEMPTED
        saved = local.saved_step()
        assert saved >= 50  # written on SIGTERM, not at a periodic boundary (every 1000 steps)
        last_report = parse_progress(message.read_text())
        assert last_report is not None and last_report.step == saved  # the status shows the saved step
        local.start("worker-0")
        assert local.wait("worker-0") == 0, local.output("worker-0")
        assert events(local.output("worker-0"), "restored")[0]["step"] == saved
        assert events(local.output("worker-0"), "finished")[0]["steps"] == total
        final = parse_progress(message.read_text())
        assert final is not None and final.step == total
    finally:
        local.stop_all()


def test_a_worker_signalled_while_it_starts_leaves_then_with_nothing_to_save(tmp_path: Path) -> None:
    """The signal waits for the trainer's handler (TensorFlow's own would take it while it starts), and then
    ends the wait for a peer that never comes (its name never resolves)."""
    args = ["--epochs", "1", "--peer-wait-seconds", "120"]
    local = LocalJob.of(job_manifest("starting", "MultiWorkerMirrored", {"Worker": 2}, args), tmp_path)
    own = json.loads(local.processes["worker-0"].env["TF_CONFIG"])["cluster"]["worker"][0]
    tf_config = {"cluster": {"worker": [own, "never.invalid:2222"]}, "task": {"type": "worker", "index": 0}}
    try:
        local.start("worker-0", {"TF_CONFIG": json.dumps(tf_config)})
        wait_for("the wait for worker 1", lambda: "waiting for peers" in local.output("worker-0"), timeout=60)
        local.kill("worker-0", signal.SIGTERM)
        assert local.running["worker-0"].returncode == ExitCode.PREEMPTED, local.output("worker-0")
        assert "nothing to save" in local.output("worker-0")
    finally:
        local.stop_all()


def _left_at(output: str) -> int:
    """The step a trainer said it saved at as it left on a termination signal."""
    found = re.search(r"preempted: (?:every worker )?saved at step (\d+)", output)
    assert found is not None, output[-3000:]
    return int(found[1])


def test_one_signalled_multi_worker_makes_every_worker_save_at_the_same_step(tmp_path: Path) -> None:
    """An eviction of one worker, periodic checkpoints far apart: nothing since the last one is lost."""
    epochs = 200
    args = ["--epochs", str(epochs), "--checkpoint-every", "5000", "--log-every", "5", "--collective", "RING"]
    local = LocalJob.of(job_manifest("mwms", "MultiWorkerMirrored", {"Worker": 2}, args), tmp_path)
    total = epochs * DIGITS_STEPS_PER_EPOCH
    try:
        for label in ("worker-0", "worker-1"):
            local.start(label)
        shown = local.wait_for_step(60)
        local.kill("worker-1", signal.SIGTERM)
        assert local.wait("worker-0", timeout=120) == ExitCode.PREEMPTED, local.output("worker-0")
        assert local.running["worker-1"].returncode == ExitCode.PREEMPTED, local.output("worker-1")
        saved = local.saved_step()
        assert saved >= shown
        assert _left_at(local.output("worker-0")) == _left_at(local.output("worker-1")) == saved
        assert local.progress()["step"] == saved

        for label in ("worker-0", "worker-1"):
            local.start(label)
        for label in ("worker-0", "worker-1"):
            assert local.wait(label) == 0, local.output(label)
            assert events(local.output(label), "restored")[0]["step"] == saved
            assert events(local.output(label), "finished")[0]["steps"] == total
        digests = {events(local.output(label), "finished")[0]["weights"] for label in ("worker-0", "worker-1")}
        assert len(digests) == 1
    finally:
        local.stop_all()


def test_parameter_server_tolerates_a_worker_and_resumes_after_a_ps_loss(tmp_path: Path) -> None:
    args = ["--epochs", "60", "--checkpoint-every", "40", "--log-every", "10"]
    counts = {"Chief": 1, "Worker": 2, "PS": 1}
    local = LocalJob.of(job_manifest("pss", "ParameterServer", counts, args), tmp_path)
    total = 60 * DIGITS_STEPS_PER_EPOCH
    try:
        for label in ("ps-0", "worker-0", "worker-1", "chief-0"):
            local.start(label)
        local.wait_for_step(40)
        local.kill("worker-1")  # tolerated: its steps go to worker-0
        reached = local.wait_for_step(local.progress()["step"] + 60)
        local.start("worker-1")  # re-admitted
        local.wait_for_step(reached + 40)

        local.kill("ps-0")
        assert local.wait("chief-0", timeout=120) == ExitCode.PEER_LOST, local.output("chief-0")
        saved = local.saved_step()
        local.start("ps-0")
        local.start("chief-0")
        assert local.wait("chief-0", timeout=600) == 0, local.output("chief-0")
        assert events(local.output("chief-0"), "restored")[0]["step"] == saved
        assert events(local.output("chief-0"), "finished")[0]["steps"] == total
        assert local.running["worker-0"].poll() is None  # servers serve until told to stop
    finally:
        local.stop_all()


def test_parameter_server_signalled_saves_from_its_servers_before_they_go(tmp_path: Path) -> None:
    """A PS evicted: the operator restarts the job, so every task is signalled; the servers serve on until
    the chief has saved and left, and the rerun resumes at that step."""
    args = ["--epochs", "40", "--checkpoint-every", "5000", "--log-every", "10"]
    counts = {"Chief": 1, "Worker": 2, "PS": 1}
    local = LocalJob.of(job_manifest("pss", "ParameterServer", counts, args), tmp_path)
    total = 40 * DIGITS_STEPS_PER_EPOCH
    labels = ("ps-0", "worker-0", "worker-1", "chief-0")
    try:
        for label in labels:
            local.start(label)
        shown = local.wait_for_step(60)
        for label in labels:
            local.running[label].send_signal(signal.SIGTERM)
        for label in labels:
            assert local.wait(label, timeout=60) == ExitCode.PREEMPTED, local.output(label)
        saved = local.saved_step()
        assert saved >= shown and _left_at(local.output("chief-0")) == saved

        for label in labels:
            local.start(label)
        assert local.wait("chief-0", timeout=600) == 0, local.output("chief-0")
        assert events(local.output("chief-0"), "restored")[0]["step"] == saved
        assert events(local.output("chief-0"), "finished")[0]["steps"] == total
    finally:
        local.stop_all()


def test_parameter_server_stops_at_a_nan_and_says_it_diverged(tmp_path: Path) -> None:
    """The coordinator (the chief) reads each scheduled step's loss: the first NaN ends it with exit code 5 and
    the word in its termination message, at the step it came; the servers serve on until stopped."""
    args = ["--epochs", "10", "--log-every", "10", "--nan-at-step", "25"]
    counts = {"Chief": 1, "Worker": 1, "PS": 1}
    local = LocalJob.of(job_manifest("psnan", "ParameterServer", counts, args), tmp_path)
    try:
        for label in ("ps-0", "worker-0", "chief-0"):
            local.start(label)
        assert local.wait("chief-0", timeout=300) == ExitCode.DIVERGED, local.output("chief-0")
        record = json.loads((tmp_path / "chief-0.termination-message").read_text())
        assert record["diverged"] is True and "at step 25" in record["error"], record
        assert record["step"] == 25 and record["loss"] is None, record
    finally:
        local.stop_all()


@pytest.mark.parametrize("strategy", ["mirrored", "central-storage"])
def test_one_process_over_two_logical_devices(tmp_path: Path, strategy: str) -> None:
    args = ["--checkpoint-dir", str(tmp_path), "--epochs", "2", "--logical-cpus", "2", "--strategy", strategy]
    result = run_trainer([*args, "--tensorboard-dir", str(tmp_path / "tensorboard")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    (training,) = events(result.stdout, "training")
    assert training["replicas"] == 2
    assert events(result.stdout, "finished")[0]["steps"] == 2 * DIGITS_STEPS_PER_EPOCH


def test_model_parallel_places_blocks_on_two_devices(tmp_path: Path) -> None:
    args = ["--checkpoint-dir", str(tmp_path), "--epochs", "2", "--logical-cpus", "2", "--model-parallel", "2"]
    result = run_trainer(args)
    assert result.returncode == 0, result.stdout + result.stderr
    (placement,) = events(result.stdout, "placement")
    assert [device.rsplit(":", 2)[-2:] for device in placement["blocks"]] == [["CPU", "0"], ["CPU", "1"]]
    assert events(result.stdout, "finished")[0]["accuracy"] > 0.8


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["--checkpoint-dir", "x"], {"TF_CONFIG": "{not json"}, ExitCode.BAD_TF_CONFIG, "TF_CONFIG is not valid"),
        (
            ["--checkpoint-dir", "x"],
            {"TF_CONFIG": '{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}'},
            ExitCode.BAD_TF_CONFIG,
            "task worker:3 is not in its cluster",
        ),
        (
            ["--checkpoint-dir", "x", "--dataset", "files", "--data-path", "/no/such/data"],
            {},
            ExitCode.DATA_NOT_FOUND,
            "/no/such/data",
        ),
        (["--checkpoint-dir", "x", "--model", "transformer"], {}, ExitCode.BAD_FLAGS, "invalid choice"),
        ([], {}, ExitCode.BAD_FLAGS, "--checkpoint-dir is required"),
    ],
)
def test_permanent_errors_name_the_problem(args: list[str], env: dict[str, str], code: int, message: str) -> None:
    result = run_trainer(args, env)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_files_dataset_from_npz(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "part-0.npz", x=rng.standard_normal((256, 4, 4, 1)).astype(np.float32), y=rng.integers(0, 3, 256)
    )
    args = [
        "--checkpoint-dir",
        str(tmp_path / "ck"),
        "--dataset",
        "files",
        "--data-path",
        str(tmp_path),
        "--epochs",
        "1",
    ]
    result = run_trainer([*args, "--global-batch-size", "32"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert events(result.stdout, "finished")[0]["steps"] == int(256 * 0.8) // 32


def test_files_dataset_from_tfrecords(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    data = tmp_path / "data"
    data.mkdir()
    with tf.io.TFRecordWriter(str(data / "part-0.tfrecord")) as writer:
        for _ in range(160):
            features = {
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=rng.standard_normal(8).tolist())),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(rng.integers(0, 2))])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
    args = ["--checkpoint-dir", str(tmp_path / "ck"), "--dataset", "files", "--data-path", str(data)]
    result = run_trainer(
        [*args, "--input-shape", "8", "--num-classes", "2", "--epochs", "1", "--global-batch-size", "32"]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert events(result.stdout, "finished")[0]["steps"] == int(160 * 0.8) // 32


def test_the_evaluator_scores_the_final_checkpoint_before_the_job_succeeds(tmp_path: Path) -> None:
    """`disttrain local run` decides as the operator does: worker 0's success waits for the evaluator's last word."""
    epochs = 6
    args = ["--model", "mlp", "--dataset", "digits", "--epochs", str(epochs), "--checkpoint-every", "40"]
    manifest = tmp_path / "job.json"
    manifest.write_text(
        json.dumps(job_manifest("evaluated", "MultiWorkerMirrored", {"Worker": 2, "Evaluator": 1}, args))
    )
    result = _local_run(manifest, tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]
    lines = result.stdout.splitlines()
    final_step = epochs * DIGITS_STEPS_PER_EPOCH
    evaluated = [
        json.loads(line.split("] ", 1)[1]) for line in lines if line.startswith('[evaluator-0] {"event": "evaluation"')
    ]
    assert evaluated and evaluated[-1]["step"] == final_step and evaluated[-1]["final"] is True, evaluated
    assert evaluated[-1]["metrics"]["accuracy"] >= 0.8
    succeeded = next(index for index, line in enumerate(lines) if line.startswith("[disttrain] job succeeded"))
    last_word = max(index for index, line in enumerate(lines) if line.startswith("[evaluator-0]"))
    assert last_word < succeeded, "the job succeeded before the evaluator spoke"
    message = json.loads((tmp_path / "evaluator-0.termination-message").read_text())
    parsed = parse_evaluation(json.dumps(message))
    assert parsed is not None and (parsed.step, parsed.final) == (final_step, True)
