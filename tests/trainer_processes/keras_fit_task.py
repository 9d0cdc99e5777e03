"""A user's own Keras 3 code: `model.fit` under MultiWorkerMirroredStrategy with a shared backup folder.

Arguments: backup folder, epochs, "patched" or "unpatched". Prints the weights digest at the end.
"""

from __future__ import annotations

import hashlib
import os
import sys

import keras
import numpy as np
import tensorflow as tf

from disttrain_trainer.data import digits
from disttrain_trainer.keras_compat import MultiWorkerBackupAndRestore, patch_keras_for_multi_worker


class StopAfter(keras.callbacks.Callback):
    """Simulates a worker lost after some epochs: the process exits without cleaning up."""

    def __init__(self, epochs: int) -> None:
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        if epoch + 1 == self.epochs:
            print(f"STOPPED after epoch {epoch + 1}", flush=True)
            os._exit(130)


def main() -> None:
    backup, epochs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    stop_after = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    if mode == "patched":
        patch_keras_for_multi_worker()
    keras.utils.set_random_seed(1)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    data = digits(seed=1)
    dataset = tf.data.Dataset.from_tensor_slices((data.x_train, data.y_train)).batch(64)
    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input((8, 8, 1)),
                keras.layers.Flatten(),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks: list[keras.callbacks.Callback] = [MultiWorkerBackupAndRestore(backup, delete_checkpoint=False)]
    if stop_after:
        callbacks.append(StopAfter(stop_after))
    history = model.fit(dataset, epochs=epochs, callbacks=callbacks, verbose=0)
    digest = hashlib.sha256(b"".join(np.asarray(w).tobytes() for w in model.get_weights())).hexdigest()[:16]
    accuracy = float(np.mean(np.argmax(model.predict(data.x_test, verbose=0), axis=1) == data.y_test))
    print(f"EPOCHS {len(history.epoch)} FIRST {history.epoch[0] if history.epoch else -1}", flush=True)
    print(f"DIGEST {digest} ACCURACY {accuracy:.3f}", flush=True)


if __name__ == "__main__":
    main()
