"""Data sets (bundled digits, synthetic, files from a mounted path) and the tf.data input pipeline."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import tensorflow as tf

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.config import TrainConfig

TEST_FRACTION = 0.2


@dataclass(frozen=True)
class DataSet:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(size) for size in self.x_train.shape[1:])


def _split(x: np.ndarray, y: np.ndarray, seed: int, num_classes: int) -> DataSet:
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    cut = int(len(x) * (1 - TEST_FRACTION))
    return DataSet(x[:cut], y[:cut], x[cut:], y[cut:], num_classes)


def digits(seed: int) -> DataSet:
    """The bundled 8x8 digits (see data/README.digits.txt), scaled to [0, 1], as 8x8x1 images."""
    with (
        resources.files("disttrain_trainer").joinpath("data/digits.csv.gz").open("rb") as raw,
        gzip.open(raw) as text,
    ):
        table = np.loadtxt(text, delimiter=",", dtype=np.float32)
    x = (table[:, :-1] / 16.0).reshape(-1, 8, 8, 1)
    return _split(x, table[:, -1].astype(np.int64), seed, 10)


def synthetic(shape: tuple[int, ...], classes: int, examples: int, seed: int) -> DataSet:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((examples, *shape), dtype=np.float32)
    return _split(x, rng.integers(0, classes, examples, dtype=np.int64), seed, classes)


def _tfrecords(files: list[Path], shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    spec = {"x": tf.io.FixedLenFeature([int(np.prod(shape))], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}
    xs, ys = [], []
    for record in tf.data.TFRecordDataset([str(path) for path in files]):
        example = tf.io.parse_single_example(record, spec)
        xs.append(example["x"].numpy().reshape(shape))
        ys.append(int(example["y"].numpy()))
    return np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.int64)


def from_files(path: Path, shape: tuple[int, ...], classes: int, seed: int) -> DataSet:
    """`.npz` files with arrays `x` and `y`, or TFRecord files of examples with features `x` (flat floats) and `y`."""
    if not path.exists():
        raise TrainerError(ExitCode.DATA_NOT_FOUND, f"data path {path} does not exist")
    files = sorted(path.iterdir()) if path.is_dir() else [path]
    arrays = [np.load(file) for file in files if file.suffix == ".npz"]
    records = [file for file in files if file.suffix in (".tfrecord", ".tfrecords")]
    if arrays:
        x = np.concatenate([array["x"] for array in arrays]).astype(np.float32)
        y = np.concatenate([array["y"] for array in arrays]).astype(np.int64)
    elif records:
        x, y = _tfrecords(records, shape)
    else:
        raise TrainerError(ExitCode.DATA_NOT_FOUND, f"no .npz or .tfrecord file in {path}")
    return _split(x, y, seed, max(classes, int(y.max()) + 1))


def load(config: TrainConfig) -> DataSet:
    if config.dataset == "digits":
        return digits(config.seed)
    if config.dataset == "synthetic":
        return synthetic(config.input_shape, config.num_classes, config.synthetic_examples, config.seed)
    assert config.data_path is not None
    return from_files(config.data_path, config.input_shape, config.num_classes, config.seed)


DatasetFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]


def training_pipeline(data: DataSet, global_batch_size: int, seed: int, skip_batches: int) -> DatasetFn:
    """A dataset_fn for `distribute_datasets_from_function`.

    Each input pipeline (worker) reads its own shard, shuffled with a fixed seed and reshuffled each
    epoch, batched by the per-replica size. The stream is deterministic, so a resumed run skips the
    batches already trained on and sees exactly what an uninterrupted run would have.
    """

    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        dataset = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train))
        dataset = dataset.shard(context.num_input_pipelines, context.input_pipeline_id)
        dataset = dataset.shuffle(len(data.x_train), seed=seed, reshuffle_each_iteration=True).repeat()
        dataset = dataset.batch(context.get_per_replica_batch_size(global_batch_size), drop_remainder=True)
        return dataset.skip(skip_batches).prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def training_set(data: DataSet) -> Callable[[], tf.data.Dataset]:
    """A ParameterServer worker's input: the whole training set, held once on the worker, as every element."""
    return lambda: tf.data.Dataset.from_tensors((data.x_train, data.y_train)).repeat()


def batch_of_step(
    examples: tf.Tensor, labels: tf.Tensor, step: tf.Tensor, global_batch_size: int, seed: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """The batch of the 1-based `step`, from its number alone: the examples, in an order shuffled afresh for
    each pass over them, cut into batches one after the other. Whichever worker runs a step, and however
    often the run was resumed, each pass shows every example once. Needs a batch no larger than the set."""
    count = tf.shape(examples, out_type=tf.int64)[0]
    positions = (step - 1) * global_batch_size + tf.range(global_batch_size, dtype=tf.int64)
    passes = positions // count
    first = passes[0]  # a batch spans at most two passes
    base = tf.constant(seed, tf.int64)

    def order(of_pass: tf.Tensor) -> tf.Tensor:
        return tf.random.experimental.index_shuffle(positions % count, tf.stack([base, of_pass]), count - 1)

    indexes = tf.where(passes == first, order(first), order(first + 1))
    return tf.gather(examples, indexes), tf.gather(labels, indexes)
