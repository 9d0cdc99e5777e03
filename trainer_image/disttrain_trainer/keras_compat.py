"""For users who bring their own Keras 3 code: make `model.fit` work under MultiWorkerMirroredStrategy.

Keras 3.15 with TensorFlow 2.21 fails there twice (keras-team/keras#20585):
- `_maybe_symbolic_build` hands a PerReplica batch to a symbolic build ("Attempt to convert a value
  (PerReplica...)"); building from the first local replica's batch is what it means to do;
- `reduce_per_replica` reduces every metric with `axis=0` across workers, which a scalar such as
  the loss does not have ("Invalid reduction dimension 0"); scalars reduce with `axis=None`.

`patch_keras_for_multi_worker()` applies both fixes (idempotent). `MultiWorkerBackupAndRestore` is
a BackupAndRestore that only the chief writes (every worker writing one HDF5 file makes one crash on
its lock and the collective abort) and every worker restores from, on a shared folder.

Usage:
    from disttrain_trainer.keras_compat import MultiWorkerBackupAndRestore, patch_keras_for_multi_worker
    patch_keras_for_multi_worker()
    model.fit(dataset, epochs=5, callbacks=[MultiWorkerBackupAndRestore("/checkpoints/backup")])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from keras.src import tree
from keras.src.backend.tensorflow import trainer as tf_trainer

_PATCHED = "_disttrain_multi_worker_patch"


def _local_value(value: Any) -> Any:
    if isinstance(value, tf.distribute.DistributedValues):
        return value.values[0]
    return value


def _maybe_symbolic_build(self: Any, iterator: Any = None, data_batch: Any = None) -> None:
    if self._distribute_strategy is None:
        return
    if iterator is not None:
        for _, _, epoch_iterator in iterator:
            data_batch = tree.map_structure(_local_value, next(epoch_iterator))
            break
    with self.distribute_strategy.scope():
        self._symbolic_build(data_batch=data_batch)


def _reduce_per_replica(original: Callable[..., Any]) -> Callable[..., Any]:
    def reduce_per_replica(values: Any, strategy: tf.distribute.Strategy, reduction: str) -> Any:
        multi_worker = tf_trainer._collective_all_reduce_multi_worker(strategy)
        if not multi_worker or reduction not in ("auto", "mean"):
            return original(values, strategy, reduction)

        def reduce(value: Any) -> Any:
            rank = _local_value(value).shape.rank
            return strategy.reduce("MEAN", value, axis=None if rank == 0 else 0)

        return tree.map_structure(reduce, values)

    return reduce_per_replica


def patch_keras_for_multi_worker() -> None:
    """Make `model.fit` work under MultiWorkerMirroredStrategy; safe to call more than once."""
    if getattr(tf_trainer, _PATCHED, False):
        return
    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    tf_trainer.reduce_per_replica = _reduce_per_replica(tf_trainer.reduce_per_replica)
    setattr(tf_trainer, _PATCHED, True)


class MultiWorkerBackupAndRestore(keras.callbacks.BackupAndRestore):
    """BackupAndRestore for several workers sharing `backup_dir`: the chief writes, everyone restores."""

    def _is_chief(self) -> bool:
        strategy = self.model.distribute_strategy
        return bool(strategy.extended.should_checkpoint)

    def _save_model(self) -> None:
        if self._is_chief():
            super()._save_model()

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._is_chief():
            super().on_train_end(logs)
