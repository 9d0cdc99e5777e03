"""One TensorFlow task of a test cluster, configured only by the TF_CONFIG in its environment.

ps and worker tasks serve until killed; the chief runs a few ParameterServerStrategy steps through a
ClusterCoordinator (or a MultiWorkerMirrored all-reduce) and prints the result.
"""

from __future__ import annotations

import json
import os
import sys

import tensorflow as tf


def main() -> None:
    strategy_name = sys.argv[1]
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if strategy_name == "ParameterServer":
        if task["type"] in ("worker", "ps"):
            server = tf.distribute.Server(
                resolver.cluster_spec(), job_name=task["type"], task_index=task["index"], protocol="grpc", start=True
            )
            server.join()
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
        with strategy.scope():
            counter = tf.Variable(0.0)

        @tf.function
        def step() -> tf.Tensor:
            counter.assign_add(1.0)
            return counter.read_value()

        for _ in range(3):
            coordinator.schedule(step)
        coordinator.join()
        print(f"RESULT {counter.numpy():.0f}", flush=True)
    else:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()

        @tf.function
        def all_reduce() -> tf.Tensor:
            return strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)

        print(f"RESULT {all_reduce().numpy():.0f}", flush=True)


if __name__ == "__main__":
    main()
