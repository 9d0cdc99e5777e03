"""The stand-in counts the trainer's steps: an epoch of the bundled digits or of a synthetic set is as long."""

from __future__ import annotations

from disttrain_trainer import config, data, stand_in


def test_an_epoch_of_the_stand_in_has_the_trainer_s_steps() -> None:
    digits = config.parse(["--checkpoint-dir", "/tmp/unused", "--global-batch-size", "64"])
    assert len(data.digits(digits.seed).x_train) == stand_in.DIGITS_TRAINING_EXAMPLES
    synthetic = config.parse(
        ["--checkpoint-dir", "/tmp/unused", "--dataset", "synthetic", "--synthetic-examples", "100"]
    )
    split = data.synthetic(synthetic.input_shape, synthetic.num_classes, synthetic.synthetic_examples, synthetic.seed)
    assert stand_in.steps_per_epoch(synthetic) == len(split.x_train) // 64
