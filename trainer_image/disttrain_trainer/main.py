"""`disttrain-train`: parse, pick the role and strategy, train; every outcome is an exit code of the table."""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Sequence
from types import FrameType

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_contract.progress import reporting_task
from disttrain_trainer import config as config_module
from disttrain_trainer import log_copy
from disttrain_trainer.reporting import fail, log, serve_progress


def _on_sigterm() -> None:
    """Every role leaves at a point where nothing is lost (preemption.py), however busy when signalled."""
    from disttrain_trainer.preemption import STOP  # noqa: PLC0415 - TensorFlow loads only once flags are good

    def handler(signum: int, frame: FrameType | None) -> None:
        STOP.set()

    signal.signal(signal.SIGTERM, handler)


def _train(config: config_module.TrainConfig) -> None:
    import tensorflow as tf  # noqa: PLC0415

    from disttrain_trainer import data, loop, peers, strategies  # noqa: PLC0415

    strategies.configure_devices(config)
    tf.keras.utils.set_random_seed(config.seed)  # the same initial weights and data order on every run
    role = config.role
    _on_sigterm()
    if role.task_type == "ps" or (role.task_type == "worker" and role.has_ps):
        loop.serve(config)
        return
    dataset = data.load(config)
    if role.task_type == "evaluator":
        loop.evaluate_alongside(config, dataset)
        return
    name = strategies.strategy_name(config)
    if name == "parameter-server":
        servers = [address for kind in ("ps", "worker") for address in role.cluster.get(kind, [])]
        peers.wait_for_peers(servers, config.peer_wait_seconds, listening=True)
    elif name == "multi-worker-mirrored":
        own = role.cluster[role.task_type][role.index]
        others = [address for kind in ("chief", "worker") for address in role.cluster.get(kind, []) if address != own]
        peers.wait_for_peers(others, config.peer_wait_seconds, listening=False)
    strategy = strategies.create(name, config)
    _on_sigterm()  # again: MultiWorkerMirrored's coordination service puts a C++ SIGTERM handler over ours
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


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        config = config_module.parse(argv)
        role = config.role
        if (role.task_type, role.index) == reporting_task(has_chief=bool(role.cluster.get("chief"))):
            serve_progress()  # before TensorFlow loads: the operator's polls are answered from the start
        _train(config)
    except TrainerError as error:
        fail(str(error), preempted=error.code is ExitCode.PREEMPTED)
        return int(error.code)
    except Exception:
        traceback.print_exc()
        return int(ExitCode.INTERNAL_ERROR)
    return int(ExitCode.SUCCESS)


def entry() -> None:
    copy = log_copy.from_environment()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if copy is not None:
        copy.finish()
    os._exit(code)  # skip TensorFlow's slow, sometimes hanging, interpreter teardown


if __name__ == "__main__":
    entry()
