"""Where a resumed run's input starts: the examples of a step follow from its number alone."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from disttrain_trainer.data import batch_of_step


def _batches(examples: np.ndarray, steps: range, batch: int, seed: int) -> list[np.ndarray]:
    labels = np.arange(len(examples))
    return [
        batch_of_step(tf.constant(examples), tf.constant(labels), tf.constant(step, tf.int64), batch, seed)[1].numpy()
        for step in steps
    ]


def test_each_pass_shows_every_example_once_in_its_own_order() -> None:
    examples = np.zeros((10, 2), np.float32)
    seen = np.concatenate(_batches(examples, range(1, 11), 4, seed=7))  # 40 examples: four passes over ten
    passes = seen.reshape(4, 10)
    for shown in passes:
        assert sorted(shown) == list(range(10))
    assert len({tuple(shown) for shown in passes}) == 4  # shuffled afresh for each pass


def test_a_step_takes_the_same_examples_whenever_it_runs() -> None:
    examples = np.zeros((10, 2), np.float32)
    straight = _batches(examples, range(1, 9), 3, seed=7)
    resumed = _batches(examples, range(5, 9), 3, seed=7)  # a run that resumes after step 4
    assert [list(batch) for batch in straight[4:]] == [list(batch) for batch in resumed]
    assert [list(batch) for batch in _batches(examples, range(1, 9), 3, seed=8)] != [list(b) for b in straight]
