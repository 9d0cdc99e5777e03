"""Built-in models as a chain of layer blocks, each optionally pinned to a device (model parallelism)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import keras
import tensorflow as tf


def _blocks(kind: str, num_classes: int) -> list[keras.Sequential]:
    if kind == "mlp":
        return [
            keras.Sequential([keras.layers.Flatten(), keras.layers.Dense(128, activation="relu")]),
            keras.Sequential([keras.layers.Dense(64, activation="relu"), keras.layers.Dense(num_classes)]),
        ]
    return [
        keras.Sequential(
            [keras.layers.Conv2D(32, 3, padding="same", activation="relu"), keras.layers.MaxPooling2D(padding="same")]
        ),
        keras.Sequential(
            [
                keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
                keras.layers.GlobalAveragePooling2D(),
                keras.layers.Dense(num_classes),
            ]
        ),
    ]


class BlockModel(keras.Model):
    """Runs its blocks in order; block i runs (and keeps its variables) on devices[i] when given.

    That is model parallelism for a model too large for one device: each device holds part of the
    layers, and activations flow from one to the next.
    """

    def __init__(self, blocks: Sequence[keras.Sequential], devices: Sequence[str | None]) -> None:
        super().__init__()
        self.stages = list(blocks)
        self.stage_devices = list(devices)

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        outputs = inputs
        for block, device in zip(self.stages, self.stage_devices, strict=True):
            with tf.device(device) if device else contextlib.nullcontext():
                outputs = block(outputs, training=training)
        return outputs


def build(kind: str, input_shape: tuple[int, ...], num_classes: int, devices: Sequence[str] = ()) -> BlockModel:
    """The model, built (variables created) on a zero batch; blocks spread round-robin over `devices`."""
    blocks = _blocks(kind, num_classes)
    placement: list[str | None] = (
        [devices[i % len(devices)] for i in range(len(blocks))] if devices else [None] * len(blocks)
    )
    shape: tuple[int | None, ...] = (None, *input_shape)
    for block, device in zip(blocks, placement, strict=True):  # variables are created where their block runs
        with tf.device(device) if device else contextlib.nullcontext():
            block.build(shape)
        shape = block.compute_output_shape(shape)
    model = BlockModel(blocks, placement)
    model(tf.zeros((1, *input_shape)))
    return model
