"""Custom training loops (Keras 3 `fit` is broken under MultiWorkerMirrored and unsupported under
ParameterServer), the servers of ps and worker tasks, and the side-car evaluator.

Checkpoints: the chief writes to `<checkpoint dir>/ckpt`, other workers to private temporary folders
(every MultiWorkerMirrored worker must save, only one copy matters); at start every role restores the
chief's latest, model, optimizer and step together, and the input resumes where that step left it.
So a run stopped and resumed any number of times trains exactly `epochs x steps` steps, and sees the
examples an uninterrupted run sees. A termination signal saves first (preemption.py).
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from disttrain_contract.divergence import divergence_message
from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer import models
from disttrain_trainer.config import TrainConfig, shared_checkpoints
from disttrain_trainer.data import DataSet, batch_of_step, training_pipeline, training_set
from disttrain_trainer.pace import Pace
from disttrain_trainer.preemption import STOP, SaveTogether, linger_while
from disttrain_trainer.reporting import ProgressReporter, log, read_progress, report_evaluation
from disttrain_trainer.strategies import local_devices

EVALUATION_INTERVAL_SECONDS = 5.0


def steps_per_epoch(config: TrainConfig, data: DataSet) -> int:
    return config.steps_per_epoch or max(1, len(data.x_train) // config.global_batch_size)


def accuracy(model: keras.Model, data: DataSet) -> float:
    logits = model(data.x_test, training=False)
    return float(np.mean(np.argmax(np.asarray(logits), axis=1) == data.y_test))


def weights_digest(model: keras.Model) -> str:
    """Equal on every worker of a synchronous run, which is how tests check the replicas agree."""
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(np.asarray(variable.numpy(), dtype=np.float32).tobytes())
    return digest.hexdigest()[:16]


def export(model: keras.Model, input_shape: tuple[int, ...], path: Path) -> None:
    """A SavedModel with a `serving_default` signature taking a float batch, returning logits."""
    module = tf.Module()
    module.model = model
    module.serve = tf.function(
        lambda inputs: {"logits": model(inputs, training=False)},
        input_signature=[tf.TensorSpec((None, *input_shape), tf.float32, name="inputs")],
    )
    if path.exists():
        shutil.rmtree(path)
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})


def _loss(model: keras.Model, inputs: tf.Tensor, labels: tf.Tensor, global_batch_size: int) -> tf.Tensor:
    per_example = keras.losses.sparse_categorical_crossentropy(labels, model(inputs, training=True), from_logits=True)
    return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)


def _step_fn(model: keras.Model, optimizer: keras.optimizers.Optimizer, global_batch_size: int) -> Callable[..., Any]:
    def replica_step(inputs: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = _loss(model, inputs, labels, global_batch_size)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
        return loss

    return replica_step


class _Run:
    """Model, optimizer and checkpoint of one training process, restored from the chief's latest."""

    def __init__(
        self, config: TrainConfig, strategy: tf.distribute.Strategy, data: DataSet, chief: bool, together: SaveTogether
    ) -> None:
        self.config, self.data, self.chief, self.together = config, data, chief, together
        devices = local_devices()[: config.model_parallel] if config.model_parallel > 1 else []
        with strategy.scope():
            self.model = models.build(config.model, data.input_shape, data.num_classes, devices)
            self.optimizer = keras.optimizers.Adam(config.learning_rate)
            self.optimizer.build(self.model.trainable_variables)
        if devices:
            log("placement", blocks=[block.weights[0].value.device for block in self.model.stages])
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer, step=self.step)
        latest = tf.train.latest_checkpoint(str(shared_checkpoints(config)))
        if latest:
            self.checkpoint.restore(latest)
            log("restored", checkpoint=latest, step=int(self.step.numpy()))
        self.restored = latest
        self._private = None if chief else Path(tempfile.mkdtemp(prefix="disttrain-ckpt-"))
        directory = shared_checkpoints(config) if chief else self._private
        self.manager = tf.train.CheckpointManager(self.checkpoint, str(directory), max_to_keep=3)
        self.per_epoch = steps_per_epoch(config, data)
        self.total = config.epochs * self.per_epoch
        self.progress = ProgressReporter(
            config.checkpoint_dir,
            chief,
            config.global_batch_size,
            self.total,
            start_step=self.done,
            restored=latest,
        )
        self.pace = Pace(config.max_steps_per_second, self.done)
        self.writer = (  # flushed every 10 s (TensorFlow's default is 2 min), so a running job's curves keep up
            tf.summary.create_file_writer(str(config.tensorboard_dir), flush_millis=10_000)
            if config.tensorboard_dir and chief
            else None
        )

    @property
    def done(self) -> int:
        return int(self.step.numpy())

    def epoch(self, step: int) -> int:
        return max(1, (step - 1) // self.per_epoch + 1)

    def loss_at(self, step: int, loss: float) -> float:
        """The step's loss, or NaN from --nan-at-step on (fault injection)."""
        injected = self.config.nan_at_step is not None and step >= self.config.nan_at_step
        return float("nan") if injected else loss

    def diverged(self, step: int, loss: float) -> TrainerError:
        """Stop at the first loss that is no number, saving nothing: the last checkpoint is the last finite one."""
        last = tf.train.latest_checkpoint(str(shared_checkpoints(self.config))) or self.restored
        where = str(Path(last).relative_to(self.config.checkpoint_dir)) if last else None
        self.progress.report(step, self.epoch(step), loss)
        return TrainerError(ExitCode.DIVERGED, divergence_message(step, loss, where))

    def save(self, step: int) -> None:
        path = self.manager.save(checkpoint_number=step)
        if self.chief:
            self.progress.saved(step, path)

    def after_steps(self, step: int, loss: float, crossed_checkpoint: bool) -> None:
        """Report, checkpoint, and leave on a termination signal, saved first, or on a loss that is no number,
        unsaved; called at step boundaries."""
        if not math.isfinite(loss):
            raise self.diverged(step, loss)
        self.step.assign(step)
        leaving = step < self.total and self.together.save_now(step)
        if leaving or step % self.config.log_every == 0 or step == self.total:
            self.progress.report(step, self.epoch(step), loss)
            if self.writer is not None:
                with self.writer.as_default():
                    tf.summary.scalar("loss", loss, step=step)
        if leaving or (crossed_checkpoint and step < self.total):
            self.save(step)
        if leaving:
            raise self.together.leave(step)
        self.pace.after(step)

    def finish(self, loss: float) -> None:
        if self.manager.latest_checkpoint is None or not self.manager.latest_checkpoint.endswith(f"-{self.total}"):
            self.save(self.total)
        score = accuracy(self.model, self.data)
        target = self.config.export_dir if self.chief else Path(tempfile.mkdtemp(prefix="disttrain-export-"))
        export(self.model, self.data.input_shape, target)
        self.progress.report(self.total, self.config.epochs, loss, finished=True, accuracy=round(score, 4))
        log("finished", steps=self.total, accuracy=score, weights=weights_digest(self.model), export=str(target))
        if self.writer is not None:
            self.writer.flush()
        if not self.chief:
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(self._private or "", ignore_errors=True)


_ITERATORS: list[Any] = []


def _never_freed(iterator: Any) -> Any:
    """Keep a dataset iterator until the process ends: freeing one waits for its input pipeline's threads, which
    took a preempted MultiWorkerMirrored worker's whole grace period (30 s after both workers had saved, the
    main thread in `~IteratorResource`). The trainer ends with os._exit (main.py), so nothing is lost."""
    _ITERATORS.append(iterator)
    return iterator


def run_synchronous(config: TrainConfig, strategy: tf.distribute.Strategy, data: DataSet, chief: bool) -> None:
    """Mirrored, MultiWorkerMirrored, CentralStorage or the default strategy: every replica steps together."""
    multi_worker = strategy.extended._in_multi_worker_mode()
    role = config.role
    kinds = ("chief", "worker")
    workers = tuple(f"{kind}-{index}" for kind in kinds for index in range(len(role.cluster.get(kind, []))))
    together = SaveTogether(workers if multi_worker else (), f"{role.task_type}-{role.index}")
    run = _Run(config, strategy, data, chief, together)
    pipelines = max(1, role.training_workers) if multi_worker else 1
    local_replicas = max(1, strategy.num_replicas_in_sync // pipelines)
    start = run.done
    dataset_fn = training_pipeline(data, config.global_batch_size, config.seed, start * local_replicas)
    iterator = _never_freed(iter(strategy.distribute_datasets_from_function(dataset_fn)))
    replica_step = _step_fn(run.model, run.optimizer, config.global_batch_size)

    @tf.function
    def train_step(batch: Any) -> tf.Tensor:
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=batch), axis=None)

    log(
        "training",
        strategy=type(strategy).__name__,
        replicas=strategy.num_replicas_in_sync,
        start=start,
        total=run.total,
    )
    loss = float("nan")
    for step in range(start + 1, run.total + 1):
        loss = run.loss_at(step, float(train_step(next(iterator))))
        run.after_steps(step, loss, step % config.checkpoint_every == 0)
    run.finish(loss)


def run_coordinator(config: TrainConfig, strategy: tf.distribute.Strategy, data: DataSet) -> None:
    """ParameterServer's chief: schedules each step on whichever worker is free; its exit ends the job.

    A lost worker's steps are put back and run elsewhere; a lost PS fails the chief (retryable), and a
    restarted chief attaches to the running servers and resumes from its checkpoint. Each step takes the
    examples its number names (`batch_of_step`), whichever worker runs it, so a resumed run sees exactly
    the examples an uninterrupted one does.
    """
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    run = _Run(config, strategy, data, chief=True, together=SaveTogether())
    if config.global_batch_size > len(data.x_train):
        message = f"--global-batch-size {config.global_batch_size} exceeds the {len(data.x_train)} examples"
        raise TrainerError(ExitCode.BAD_FLAGS, message)
    iterator = _never_freed(iter(coordinator.create_per_worker_dataset(training_set(data))))
    replica_step = _step_fn(run.model, run.optimizer, config.global_batch_size)

    @tf.function
    def train_step(iterator: Any, step: tf.Tensor) -> tf.Tensor:
        examples, labels = next(iterator)
        batch = batch_of_step(examples, labels, step, config.global_batch_size, config.seed)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(replica_step, args=batch), axis=None)

    done = run.done
    log("training", strategy=type(strategy).__name__, workers=len(config.role.cluster.get("worker", [])), start=done)
    loss = float("nan")
    while done < run.total:
        chunk = min(config.log_every, run.total - done)
        steps = [tf.constant(step, tf.int64) for step in range(done + 1, done + chunk + 1)]
        results = [coordinator.schedule(train_step, args=(iterator, step)) for step in steps]
        coordinator.join()
        losses = [run.loss_at(done + offset, float(result.fetch())) for offset, result in enumerate(results, start=1)]
        first_lost = next((offset for offset, value in enumerate(losses, start=1) if not math.isfinite(value)), None)
        if first_lost is not None:
            raise run.diverged(done + first_lost, losses[first_lost - 1])
        loss = losses[-1]
        crossed = (done + chunk) // config.checkpoint_every > done // config.checkpoint_every
        done += chunk
        run.after_steps(done, loss, crossed)
    run.finish(loss)


def serve(config: TrainConfig) -> None:
    """A ps or worker task of ParameterServer: serve the coordinator until stopped (SIGTERM), and then on
    while the chief is there: it saves the variables this PS holds, or waits for the steps this worker runs."""
    role = config.role
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(), job_name=role.task_type, task_index=role.index, protocol="grpc", start=True
    )
    log("serving", task=f"{role.task_type}:{role.index}", target=server.target)
    while not STOP.is_set():  # not server.join(), which blocks in C++ where Python's SIGTERM handler never runs
        time.sleep(0.2)
    chief = next(iter(role.cluster.get("chief", [])), None)
    linger_while(chief, config.server_linger_seconds)
    raise TrainerError(ExitCode.PREEMPTED, "stopped by a termination signal, served on while the chief was there")


def evaluate_alongside(config: TrainConfig, data: DataSet) -> None:
    """The side-car evaluator: score each new checkpoint of the chief; once training has finished, score the
    final checkpoint and end (the operator gives it runPolicy.finalEvaluationSeconds for that)."""
    model = models.build(config.model, data.input_shape, data.num_classes)
    # The model's weights are in the chief's checkpoint as the optimizer's variables (a Keras 3 model is
    # no checkpoint child of its own): restoring the model alone would leave its initial weights.
    optimizer = keras.optimizers.Adam(config.learning_rate)
    optimizer.build(model.trainable_variables)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    seen: str | None = None
    scores: dict[str, float] = {}
    while not STOP.is_set():
        # Finished first, then the newest checkpoint: the chief saves its final checkpoint before it says
        # it finished, so the checkpoint read after `finished` is the final one.
        finished = bool((read_progress(config.checkpoint_dir) or {}).get("finished", False))
        latest = tf.train.latest_checkpoint(str(shared_checkpoints(config)))
        if latest and latest != seen:
            checkpoint.restore(latest).expect_partial()
            scores, seen = {"accuracy": accuracy(model, data)}, latest
            report_evaluation(config.checkpoint_dir, latest, scores, final=finished)
        elif finished and seen is not None:  # scored before training said it had finished: it was the final one
            report_evaluation(config.checkpoint_dir, seen, scores, final=True)
        if finished:
            return
        STOP.wait(EVALUATION_INTERVAL_SECONDS)
    raise TrainerError(ExitCode.PREEMPTED, "stopped: the evaluator holds nothing to save")
