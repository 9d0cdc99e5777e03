"""Functions the tests ship with `Client.train` and `disttrain.local.train`, each importing what it uses (only
its source travels), and how to read what they print."""

from __future__ import annotations

import json
from typing import Any

REPORT_PREFIX = '{"workers"'


def reduce_across_workers(strategy: Any, value: float, greeting_from: str | None = None) -> None:
    """Sum `value` over every worker in one collective; print how many took part and the sum, and the
    GREETING of the module `greeting_from` (a package installed at the job's start) where one is named."""
    import importlib  # noqa: PLC0415 - a shipped function imports what it uses
    import json  # noqa: PLC0415

    import tensorflow as tf  # noqa: PLC0415

    context = tf.distribute.get_replica_context
    total = strategy.run(lambda: context().all_reduce("SUM", tf.constant(value)))
    reduced = strategy.experimental_local_results(total)[0]
    report = {"workers": strategy.num_replicas_in_sync, "sum": float(reduced)}
    if greeting_from is not None:
        report["greeting"] = importlib.import_module(greeting_from).GREETING
    print(json.dumps(report), flush=True)


def greets() -> None:
    """Print what the package installed at the job's start holds."""
    import tiny_greeting  # type: ignore[import-not-found]  # noqa: PLC0415 - installed at the job's start

    print(f"greeting {tiny_greeting.GREETING}", flush=True)


def fits_until_nan(strategy: Any, nan_from: int) -> None:
    """Fit a one-weight model with Keras, taking no `progress`: its inputs are infinite from batch `nan_from` on,
    so the loss turns NaN there."""
    import numpy as np  # noqa: PLC0415
    import tensorflow as tf  # noqa: PLC0415

    x = np.ones((64, 1), dtype="float32")
    x[nan_from * 4 :] = np.inf
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    model.fit(tf.data.Dataset.from_tensor_slices((x, x)).batch(4), epochs=1, verbose=0)


def kubeflow_v1_style(parameters: dict[str, Any]) -> None:
    """A function as Kubeflow's v1 SDK calls it, with one dict; it builds its own strategy."""
    import json  # noqa: PLC0415

    print(json.dumps({"given": parameters}), flush=True)


def fails(rate: float) -> None:
    raise ValueError(f"rate {rate} is out of range")


def nothing() -> None:
    """Runs only once its packages installed."""


def reports(log: str) -> list[dict[str, Any]]:
    """What `reduce_across_workers` printed in a log."""
    return [json.loads(line) for line in log.splitlines() if line.startswith(REPORT_PREFIX)]
