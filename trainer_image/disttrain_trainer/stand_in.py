"""`disttrain-stand-in`: the trainer's contract without TensorFlow, for tests of what the operator decides.

It takes `disttrain-train`'s flags and TF_CONFIG, waits for its peers as the trainer does, counts steps at a
steady pace, reports progress from the reporting task, saves its step under `<checkpoint dir>/ckpt` by
TensorFlow's file names and resumes from the latest, saves on SIGTERM and leaves PREEMPTED, turns its loss
NaN at `--nan-at-step` and leaves DIVERGED. A MultiWorkerMirrored job's workers step together as its
all-reduce makes them (`lockstep`): they start together, a peer gone fails the step (PEER_LOST), a frozen one
holds them all, a signal makes all leave at one step. A ParameterServer's ps and worker tasks serve until
signalled and on while the chief is there; an evaluator scores each checkpoint. Every outcome is an exit code
of the table.

A one-step run takes 0.16 s where TensorFlow's import alone takes 5.4 s (docs/testing.md), and it uses no core
while it waits, so a decision test (a restart, a deadline, an eviction, a queue) costs its own time only. Its steps
compute nothing: what TensorFlow does when a peer freezes or a collective fails is the trainer's to show.
"""

from __future__ import annotations

import json
import math
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from disttrain_contract.divergence import divergence_message
from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_contract.progress import reporting_task
from disttrain_trainer import config as config_module
from disttrain_trainer.lockstep import Lockstep
from disttrain_trainer.main import exit_after, exit_code, serve_progress_if_reporting
from disttrain_trainer.pace import Pace
from disttrain_trainer.peers import Answer, peers_before_training, probe, wait_for_peers
from disttrain_trainer.reporting import (
    ProgressReporter,
    log,
    read_progress,
    report_evaluation,
    write_atomically,
)

DEFAULT_STEPS_PER_SECOND = 80  # about the trainer's MLP on the bundled digits: two workers on two cores, 88 a second
# The same trainer unlimited on the real node's two cores, in its image (tests/integration/test_real_node.py's
# time-left test measured 130): the pace at which the stand-in takes TensorFlow's place in a scenario timed for it.
TRAINER_PACE = 130
DIGITS_TRAINING_EXAMPLES = 1437  # the bundled digits' training split (data.py), so the same steps an epoch
TRAINING_FRACTION = 0.8  # of a synthetic data set, as data.py splits it
EVALUATION_INTERVAL_SECONDS = 1.0
SERVER_PROBE_SECONDS = 1.0
STOP = threading.Event()


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    STOP.set()


def steps_per_epoch(config: config_module.TrainConfig) -> int:
    """The trainer's count: `--steps-per-epoch`, else one pass over the training split at the global batch."""
    if config.steps_per_epoch:
        return config.steps_per_epoch
    if config.dataset == "digits":
        examples = DIGITS_TRAINING_EXAMPLES
    elif config.dataset == "synthetic":
        examples = int(config.synthetic_examples * TRAINING_FRACTION)
    else:
        raise TrainerError(ExitCode.BAD_FLAGS, "the stand-in reads no files: give --steps-per-epoch")
    return max(1, examples // config.global_batch_size)


def latest_checkpoint(config: config_module.TrainConfig) -> tuple[int, str] | None:
    """The step and path that TensorFlow's `checkpoint` state file names, as the stand-in writes it."""
    try:
        state = (config_module.shared_checkpoints(config) / "checkpoint").read_text()
    except OSError:
        return None
    name = state.split('"')[1] if state.count('"') >= 2 else ""
    step = name.rsplit("-", 1)[-1]
    return (int(step), str(config_module.shared_checkpoints(config) / name)) if step.isdigit() else None


def save(config: config_module.TrainConfig, step: int) -> str:
    """`ckpt-<step>.index` and the state file naming it, as a TensorFlow CheckpointManager leaves them."""
    path = config_module.shared_checkpoints(config) / f"ckpt-{step}"
    write_atomically(Path(f"{path}.index"), json.dumps({"step": step}))
    write_atomically(config_module.shared_checkpoints(config) / "checkpoint", f'model_checkpoint_path: "ckpt-{step}"\n')
    return str(path)


class _Listener:
    """Accepts and closes connections on this task's TF_CONFIG port, as a TensorFlow server answers its peers."""

    def __init__(self, role: config_module.Role) -> None:
        own = role.cluster.get(role.task_type, [])
        port = _port(own[role.index]) if own else 0
        self._socket = socket.create_server(("", port)) if port else None
        if self._socket is not None:
            threading.Thread(target=self._accept, name="stand-in-server", daemon=True).start()

    def _accept(self) -> None:
        assert self._socket is not None
        while True:
            connection, _ = self._socket.accept()
            connection.close()


class _ServersWatch:
    """A ParameterServer chief's servers, probed once a second: one that stops accepting is a lost peer, as a lost
    PS fails TensorFlow's coordinator (a lost worker's steps go elsewhere)."""

    def __init__(self, servers: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self._servers, self._clock = list(servers), clock
        self._next = clock() + SERVER_PROBE_SECONDS

    def check(self) -> None:
        if not self._servers or self._clock() < self._next:
            return
        self._next = self._clock() + SERVER_PROBE_SECONDS
        lost = [server for server in self._servers if probe(server, timeout=1.0) is not Answer.ACCEPTS]
        if lost:
            raise TrainerError(ExitCode.PEER_LOST, f"a peer was lost: {', '.join(lost)}")


def train(config: config_module.TrainConfig, chief: bool, lockstep: Lockstep | None = None) -> None:
    """Steps from the latest checkpoint to the last; the chief reports, saves, and saves again on SIGTERM. Under
    MultiWorkerMirrored the workers step together (`lockstep`), leave at the same step, and each answers its
    peers on the way out, however it leaves but for a lost peer."""
    if lockstep is not None:  # before the restore, as TensorFlow's collectives start before its checkpoint is read
        lockstep.join(config.peer_wait_seconds, STOP.is_set)
    restored = latest_checkpoint(config)
    start = restored[0] if restored else 0
    if restored:
        log("restored", checkpoint=restored[1], step=start)
    progress = ProgressReporter(
        config.checkpoint_dir,
        chief,
        config.global_batch_size,
        config.epochs * steps_per_epoch(config),
        start_step=start,
        restored=restored[1] if restored else None,
    )
    if lockstep is None:
        _steps(config, chief, progress, start, None)
        return
    lockstep.advanced(start)
    try:
        _steps(config, chief, progress, start, lockstep)
    except TrainerError as error:
        if error.code is not ExitCode.PEER_LOST:
            lockstep.farewell()
        raise
    lockstep.farewell()


def _steps(
    config: config_module.TrainConfig, chief: bool, progress: ProgressReporter, start: int, lockstep: Lockstep | None
) -> None:
    per_epoch = steps_per_epoch(config)
    total = config.epochs * per_epoch
    pace = Pace(config.max_steps_per_second or DEFAULT_STEPS_PER_SECOND, start)
    servers = _ServersWatch(config.role.cluster.get("ps", []) if config.role.task_type == "chief" else [])
    log("training", strategy="stand-in", start=start, total=total)
    step, last_saved, loss = start, start, float("nan")
    while step < total:
        leave_at = _leave_at(step, lockstep)
        if leave_at is not None and step >= leave_at:
            progress.report(step, _epoch(step, per_epoch), loss)
            if chief:
                progress.saved(step, save(config, step))
            raise TrainerError(ExitCode.PREEMPTED, f"preempted: saved at step {step}")
        step += 1
        epoch, loss = _epoch(step, per_epoch), _loss(config, step)
        if not math.isfinite(loss):
            progress.report(step, epoch, loss)
            latest = latest_checkpoint(config)
            where = str(Path(latest[1]).relative_to(config.checkpoint_dir)) if latest else None
            raise TrainerError(ExitCode.DIVERGED, divergence_message(step, loss, where))
        if lockstep is not None:
            lockstep.advanced(step)
        if step % config.log_every == 0 or step == total:
            progress.report(step, epoch, loss)
        if chief and step % config.checkpoint_every == 0 and step < total:
            progress.saved(step, save(config, step))
            last_saved = step
        servers.check()
        pace.after(step)
    if chief and last_saved != total:
        progress.saved(total, save(config, total))
    progress.report(total, config.epochs, loss, finished=True)
    log("finished", steps=total)


def _epoch(step: int, per_epoch: int) -> int:
    return max(1, (step - 1) // per_epoch + 1)


def _loss(config: config_module.TrainConfig, step: int) -> float:
    """A falling loss, NaN from `--nan-at-step`."""
    return float("nan") if config.nan_at_step is not None and step >= config.nan_at_step else 2.3 / (1 + step / 100)


def _leave_at(step: int, lockstep: Lockstep | None) -> int | None:
    """The step to leave at on a termination signal: this one for a lone process; under the lockstep the step it
    names, or a peer named, ahead of every worker, once the peers are close enough for the next step."""
    if lockstep is None:
        return step if STOP.is_set() else None
    if STOP.is_set():
        lockstep.stop()
    return lockstep.before(step + 1)


def serve(config: config_module.TrainConfig) -> None:
    """A ParameterServer ps or worker task: serve until signalled, then on while the chief answers."""
    role = config.role
    log("serving", task=f"{role.task_type}:{role.index}")
    STOP.wait()
    chief = next(iter(role.cluster.get("chief", [])), None)
    lingering = threading.Event()
    timer = threading.Timer(config.server_linger_seconds, lingering.set)
    timer.start()
    while chief is not None and not lingering.is_set() and probe(chief, timeout=1.0) is Answer.ACCEPTS:
        lingering.wait(0.2)
    timer.cancel()
    raise TrainerError(ExitCode.PREEMPTED, "stopped by a termination signal, served on while the chief was there")


def evaluate(config: config_module.TrainConfig) -> None:
    """The side-car evaluator: each new checkpoint scored; the final one once training says it finished."""
    seen: str | None = None
    while not STOP.is_set():
        finished = bool((read_progress(config.checkpoint_dir) or {}).get("finished", False))
        latest = latest_checkpoint(config)
        if latest and latest[1] != seen:
            seen = latest[1]
            report_evaluation(config.checkpoint_dir, seen, {"accuracy": 0.5}, final=finished)
        elif finished and seen is not None:
            report_evaluation(config.checkpoint_dir, seen, {"accuracy": 0.5}, final=True)
        if finished:
            return
        STOP.wait(EVALUATION_INTERVAL_SECONDS)
    raise TrainerError(ExitCode.PREEMPTED, "stopped: the evaluator holds nothing to save")


def run(config: config_module.TrainConfig) -> None:
    role = config.role
    has_chief = bool(role.cluster.get("chief"))
    addresses, listening = peers_before_training(role, parameter_server=role.has_ps)
    own = role.cluster.get(role.task_type, [])
    synchronous = role.task_type in ("chief", "worker") and not role.has_ps and bool(addresses)
    lockstep = Lockstep(f"{role.task_type}-{role.index}", _port(own[role.index]), addresses) if synchronous else None
    if lockstep is None:
        _Listener(role)
    log("started", task=f"{role.task_type}:{role.index}", strategy="stand-in")
    if role.task_type == "evaluator":
        evaluate(config)
        return
    if role.task_type == "ps" or (role.task_type == "worker" and role.has_ps):
        serve(config)
        return
    wait_for_peers(addresses, config.peer_wait_seconds, listening=listening, stopped=STOP.is_set)
    train(config, (role.task_type, role.index) == reporting_task(has_chief), lockstep)


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)

    def parse_and_run() -> None:
        config = config_module.parse(argv)
        serve_progress_if_reporting(config.role)
        run(config)

    return exit_code(parse_and_run, program="disttrain-stand-in")


def entry() -> None:
    exit_after(main)


if __name__ == "__main__":
    entry()
