"""Flags (with environment defaults) and TF_CONFIG, parsed into typed values before TensorFlow starts.

Everything a user can get wrong is checked here, so a bad flag or TF_CONFIG ends with a one-line
message and a permanent exit code rather than a TensorFlow traceback.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from disttrain_contract.exit_codes import ExitCode, TrainerError

STRATEGIES = ("auto", "default", "mirrored", "central-storage", "multi-worker-mirrored", "parameter-server")
TASK_TYPES = ("chief", "worker", "ps", "evaluator")


@dataclass(frozen=True)
class Role:
    """This process's place in the cluster, from TF_CONFIG (a lone process when there is none)."""

    task_type: str = "worker"
    index: int = 0
    cluster: dict[str, list[str]] = field(default_factory=dict)

    @property
    def training_workers(self) -> int:
        """Tasks that run training steps together under MultiWorkerMirrored: chief and workers."""
        return len(self.cluster.get("chief", [])) + len(self.cluster.get("worker", []))

    @property
    def has_ps(self) -> bool:
        return bool(self.cluster.get("ps"))


@dataclass(frozen=True)
class TrainConfig:
    model: str
    dataset: str
    data_path: Path | None
    input_shape: tuple[int, ...]
    num_classes: int
    synthetic_examples: int
    epochs: int
    steps_per_epoch: int | None
    global_batch_size: int
    learning_rate: float
    checkpoint_dir: Path
    export_dir: Path
    tensorboard_dir: Path | None
    checkpoint_every: int
    strategy: str
    collective: str
    model_parallel: int
    logical_cpus: int
    seed: int
    log_every: int
    peer_wait_seconds: float
    server_linger_seconds: float
    role: Role
    nan_at_step: int | None = None
    max_steps_per_second: int | None = None


def shared_checkpoints(config: TrainConfig) -> Path:
    """Where the chief saves, and every role restores from: `<checkpoint dir>/ckpt`."""
    return config.checkpoint_dir / "ckpt"


def parse_role(raw: str | None) -> Role:
    if not raw:
        return Role()
    try:
        config = json.loads(raw)
        cluster = {str(kind): [str(address) for address in addresses] for kind, addresses in config["cluster"].items()}
        task = config["task"]
        task_type, index = str(task["type"]), int(task["index"])
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise TrainerError(ExitCode.BAD_TF_CONFIG, f"TF_CONFIG is not valid: {error!r}") from error
    unknown = sorted(set(cluster) - set(TASK_TYPES))
    if unknown:
        raise TrainerError(ExitCode.BAD_TF_CONFIG, f"TF_CONFIG has unknown task types: {', '.join(unknown)}")
    if task_type not in TASK_TYPES:
        raise TrainerError(ExitCode.BAD_TF_CONFIG, f"TF_CONFIG task type {task_type!r} is not one of {TASK_TYPES}")
    if not 0 <= index < len(cluster.get(task_type, [])):
        raise TrainerError(ExitCode.BAD_TF_CONFIG, f"TF_CONFIG task {task_type}:{index} is not in its cluster")
    return Role(task_type, index, cluster)


def _shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a shape like 32,32,3: {text!r}") from error
    if not shape or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"not a shape like 32,32,3: {text!r}")
    return shape


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """Bad flags become a TrainerError (exit code BAD_FLAGS) instead of argparse's own exit."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise TrainerError(ExitCode.BAD_FLAGS, message)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = _Parser(prog="disttrain-train", description="Distributed TensorFlow training driven by TF_CONFIG.")
    parser.add_argument("--model", choices=["mlp", "cnn"], default=env("DISTTRAIN_MODEL", "mlp"))
    parser.add_argument(
        "--dataset", choices=["digits", "synthetic", "files"], default=env("DISTTRAIN_DATASET", "digits")
    )
    parser.add_argument("--data-path", type=Path, default=env("DISTTRAIN_DATA_PATH"), help="folder or file for files")
    parser.add_argument("--input-shape", type=_shape, default=_shape(env("DISTTRAIN_INPUT_SHAPE", "32,32,3")))
    parser.add_argument("--num-classes", type=_positive, default=int(env("DISTTRAIN_NUM_CLASSES", "10")))
    parser.add_argument("--synthetic-examples", type=_positive, default=2048)
    parser.add_argument("--epochs", type=_positive, default=int(env("DISTTRAIN_EPOCHS", "5")))
    parser.add_argument("--steps-per-epoch", type=_positive, default=None, help="default: one pass over the data")
    parser.add_argument("--global-batch-size", type=_positive, default=int(env("DISTTRAIN_GLOBAL_BATCH_SIZE", "64")))
    parser.add_argument("--learning-rate", type=float, default=float(env("DISTTRAIN_LEARNING_RATE", "0.01")))
    parser.add_argument("--checkpoint-dir", type=Path, default=env("DISTTRAIN_CHECKPOINT_DIR"))
    parser.add_argument("--export-dir", type=Path, default=None, help="default: <checkpoint dir>/export")
    parser.add_argument("--tensorboard-dir", type=Path, default=env("DISTTRAIN_TENSORBOARD_DIR"))
    parser.add_argument("--checkpoint-every", type=_positive, default=50, help="steps between checkpoints")
    parser.add_argument("--strategy", choices=STRATEGIES, default=env("DISTTRAIN_STRATEGY", "auto"))
    parser.add_argument("--collective", choices=["AUTO", "RING", "NCCL"], default="AUTO")
    parser.add_argument("--model-parallel", type=_positive, default=1, help="place layer blocks over K local devices")
    parser.add_argument("--logical-cpus", type=int, default=0, help="split the CPU into N logical devices")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--log-every", type=_positive, default=10, help="steps between progress reports")
    parser.add_argument(
        "--peer-wait-seconds",
        type=_positive,
        default=180,
        help="how long a task waits for peers that do not answer (a ParameterServer chief: that do not accept "
        "connections) before it exits 130 naming them; a peer whose name does not resolve yet is waited for",
    )
    parser.add_argument(
        "--server-linger-seconds",
        type=_positive,
        default=20,
        help="how long a ParameterServer ps or worker task, once sent SIGTERM, serves on while the chief is there "
        "(the chief saves from the ps tasks and waits for its steps on the workers)",
    )
    parser.add_argument(
        "--nan-at-step",
        type=_positive,
        default=None,
        help="fault injection: the loss reads NaN from this step on, as a diverging run's would (the trainer exits 5 "
        "there, and the operator fails the job as Diverged)",
    )
    parser.add_argument(
        "--max-steps-per-second",
        type=_positive,
        default=None,
        help="train at most this many steps a second: a run faster than that keeps a steady speed on a shared "
        "machine, as a GPU job's steps do",
    )
    return parser


def parse(argv: Sequence[str] | None = None, environ: dict[str, str] | None = None) -> TrainConfig:
    args = build_parser().parse_args(argv)
    environ = dict(os.environ if environ is None else environ)
    if args.checkpoint_dir is None:
        raise TrainerError(ExitCode.BAD_FLAGS, "--checkpoint-dir is required (or DISTTRAIN_CHECKPOINT_DIR)")
    if args.dataset == "files" and args.data_path is None:
        raise TrainerError(ExitCode.BAD_FLAGS, "--dataset files needs --data-path")
    if args.data_path is not None and args.dataset == "files" and not args.data_path.exists():
        raise TrainerError(ExitCode.DATA_NOT_FOUND, f"data path {args.data_path} does not exist")
    role = parse_role(environ.get("TF_CONFIG"))
    return TrainConfig(
        model=args.model,
        dataset=args.dataset,
        data_path=args.data_path,
        input_shape=args.input_shape,
        num_classes=args.num_classes,
        synthetic_examples=args.synthetic_examples,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        global_batch_size=args.global_batch_size,
        learning_rate=args.learning_rate,
        checkpoint_dir=args.checkpoint_dir,
        export_dir=args.export_dir or args.checkpoint_dir / "export",
        tensorboard_dir=args.tensorboard_dir,
        checkpoint_every=args.checkpoint_every,
        strategy=args.strategy,
        collective=args.collective,
        model_parallel=args.model_parallel,
        logical_cpus=args.logical_cpus,
        seed=args.seed,
        log_every=args.log_every,
        peer_wait_seconds=args.peer_wait_seconds,
        server_linger_seconds=args.server_linger_seconds,
        role=role,
        nan_at_step=args.nan_at_step,
        max_steps_per_second=args.max_steps_per_second,
    )
