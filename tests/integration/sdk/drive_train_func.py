"""A user's script with Kubeflow's SDK (`kubeflow-training`), unchanged: `create_job(train_func=...)` runs
a function as a TFJob, first MultiWorkerMirrored over two workers, then ParameterServer with a chief, a ps
and a worker, and writes what the chief or worker 0 printed as JSON to a file, with the end of each log it
read (the SDK prints too, so stdout is not read). Run with the SDK's own Python:
`drive_train_func.py KUBECONFIG NAMESPACE IMAGE RESULT_FILE`.

The functions travel as their source, as a user's do: they import what they use and are unannotated
(the SDK's script imports nothing for annotations to name).
"""

# ruff: noqa: PLC0415
# mypy: disable-error-code="no-untyped-def,untyped-decorator"

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

from kubeflow.training import TrainingClient


def all_reduce(parameters):
    import json

    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    context = tf.distribute.get_replica_context
    total = strategy.run(lambda: context().all_reduce("SUM", tf.constant(parameters["value"])))
    reduced = strategy.experimental_local_results(total)[0]
    print(json.dumps({"workers": strategy.num_replicas_in_sync, "sum": float(reduced)}), flush=True)


def parameter_server(parameters):
    import json

    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if resolver.task_type in ("ps", "worker"):
        cluster = resolver.cluster_spec()
        tf.distribute.Server(cluster, job_name=resolver.task_type, task_index=resolver.task_id).join()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        total = tf.Variable(0.0)

    @tf.function
    def add():
        total.assign_add(parameters["value"])

    for _ in range(parameters["steps"]):
        coordinator.schedule(add)
    coordinator.join()
    ps = len(resolver.cluster_spec().job_tasks("ps"))
    print(json.dumps({"ps": ps, "total": float(total.numpy())}), flush=True)


kubeconfig, namespace, image, result_file = sys.argv[1:5]
trainer = TrainingClient(config_file=kubeconfig, namespace=namespace, job_kind="TFJob")
trainer.create_job(name="mwms", train_func=all_reduce, parameters={"value": 1.5}, num_workers=2, base_image=image)
trainer.create_job(
    name="ps",
    train_func=parameter_server,
    parameters={"value": 0.5, "steps": 8},
    num_workers=1,
    num_ps_replicas=1,
    num_chief_replicas=1,
    base_image=image,
)


def printed_objects(text: str) -> list[dict[str, object]]:
    """The lines that are objects: what the functions printed. TensorFlow's log may hold others that start
    with a brace (gRPC's error details while a peer is not up yet: `{created_time:...}`). A log that is one
    JSON document and nothing else comes back from the SDK as that document's Python repr: the kubernetes
    client reads every answer as JSON first, a log's too, and makes a `str` of what it found."""
    found: list[object] = []
    for line in text.splitlines():
        for parse in (json.loads, ast.literal_eval):
            try:
                found.append(parse(line))
                break
            except (ValueError, SyntaxError):
                continue
    return [entry for entry in found if isinstance(entry, dict)]


printed, read = {}, {}
for name in ("mwms", "ps"):
    trainer.wait_for_job_conditions(name, expected_conditions={"Succeeded"}, wait_timeout=600, polling_interval=2)
    logs, _ = trainer.get_job_logs(name)  # the chief's, else worker 0's
    printed[name] = [entry for text in logs.values() for entry in printed_objects(text)]
    read[name] = {pod: text[-3000:] for pod, text in logs.items()}  # for the test's message, should it fail
Path(result_file).write_text(json.dumps({"printed": printed, "logs": read}))
