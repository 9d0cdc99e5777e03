"""`disttrain-train`: parse, pick the role and strategy, train; every outcome is an exit code of the table."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from types import FrameType

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_contract.progress import reporting_task
from disttrain_trainer import config as config_module
from disttrain_trainer import log_copy
from disttrain_trainer.reporting import fail, log, serve_progress


def _hold_sigterm() -> None:
    """Block SIGTERM from the start, in this thread and so in every thread started later: TensorFlow's
    coordination service (MultiWorkerMirrored) puts a C++ handler of its own over any, which would take a
    signal that reaches one of its threads. It stays pending until `_listen_for_sigterm`."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _sigterm_pending() -> bool:
    return signal.SIGTERM in signal.sigpending()


def _listen_for_sigterm() -> None:
    """Every role leaves at a point where nothing is lost (preemption.py), however busy when signalled; a
    signal that came while it started is taken now. Only this thread takes it."""
    from disttrain_trainer.preemption import STOP  # noqa: PLC0415 - TensorFlow loads only once flags are good

    def handler(signum: int, frame: FrameType | None) -> None:
        STOP.set()

    signal.signal(signal.SIGTERM, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _train(config: config_module.TrainConfig) -> None:
    import tensorflow as tf  # noqa: PLC0415

    from disttrain_trainer import data, loop, peers, preemption, strategies  # noqa: PLC0415

    strategies.configure_devices(config)
    tf.keras.utils.set_random_seed(config.seed)  # the same initial weights and data order on every run
    role = config.role
    if role.task_type == "ps" or (role.task_type == "worker" and role.has_ps):
        _listen_for_sigterm()
        loop.serve(config)
        return
    dataset = data.load(config)
    if role.task_type == "evaluator":
        _listen_for_sigterm()
        loop.evaluate_alongside(config, dataset)
        return
    name = strategies.strategy_name(config)
    if name in ("parameter-server", "multi-worker-mirrored"):
        addresses, listening = peers.peers_before_training(role, parameter_server=name == "parameter-server")
        peers.wait_for_peers(addresses, config.peer_wait_seconds, listening=listening, stopped=_sigterm_pending)
    strategy = strategies.create(name, config)
    _listen_for_sigterm()
    if preemption.STOP.is_set():
        raise TrainerError(ExitCode.PREEMPTED, "preempted: stopped before training started, nothing to save")
    log("started", task=f"{role.task_type}:{role.index}", strategy=name)
    try:
        if name == "parameter-server":
            loop.run_coordinator(config, strategy, dataset)
        else:
            chief = strategy.extended.should_checkpoint if name == "multi-worker-mirrored" else True
            loop.run_synchronous(config, strategy, dataset, chief)
    except (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.CancelledError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TrainerError(ExitCode.PEER_LOST, f"a peer was lost: {first_line}") from error
    except tf.errors.DeadlineExceededError as error:
        raise TrainerError(ExitCode.PEER_LOST, f"a peer did not answer in time: {error}") from error


def exit_code(run: Callable[[], None], program: str = "disttrain-train") -> int:
    """`run`'s outcome as an exit code of the table: a TrainerError said in one line after the `program`'s name
    (and in the termination message), any other error with its traceback. The stand-in ends the same way."""
    try:
        run()
    except TrainerError as error:
        preempted, diverged = error.code is ExitCode.PREEMPTED, error.code is ExitCode.DIVERGED
        fail(str(error), preempted=preempted, diverged=diverged, program=program)
        return int(error.code)
    except Exception:
        traceback.print_exc()
        return int(ExitCode.INTERNAL_ERROR)
    return int(ExitCode.SUCCESS)


def serve_progress_if_reporting(role: config_module.Role) -> None:
    """The reporting task serves its progress before anything slow loads: the operator's polls are answered
    from the start."""
    if (role.task_type, role.index) == reporting_task(has_chief=bool(role.cluster.get("chief"))):
        serve_progress()


def exit_after(main: Callable[[], int]) -> None:
    """Runs `main` with the pod's log copied where the operator keeps it, and exits with its code."""
    copy = log_copy.from_environment()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if copy is not None:
        copy.finish()
    os._exit(code)  # skip TensorFlow's slow, sometimes hanging, interpreter teardown


def main(argv: Sequence[str] | None = None) -> int:
    _hold_sigterm()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    def parse_and_train() -> None:
        config = config_module.parse(argv)
        serve_progress_if_reporting(config.role)
        _train(config)

    return exit_code(parse_and_train)


def entry() -> None:
    _hold_sigterm()  # before the log copy's thread starts
    exit_after(main)


if __name__ == "__main__":
    entry()
