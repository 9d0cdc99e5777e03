"""A user's script with Kubeflow's SDK (`kubeflow-training`), unchanged: it runs a TFJob through
TrainingClient and writes what each call answered as JSON to a file (the SDK and its client may print
too, so stdout is not read). Run with the SDK's own Python:
`drive_tfjob.py KUBECONFIG NAMESPACE NAME IMAGE RESULT_FILE`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kubeflow.training import TrainingClient, models
from kubernetes import client

kubeconfig, namespace, name, image, result_file = sys.argv[1:6]
trainer = TrainingClient(config_file=kubeconfig, namespace=namespace, job_kind="TFJob")
container = client.V1Container(
    name="tensorflow",
    image=image,
    command=["disttrain-train"],
    args=[
        "--model",
        "mlp",
        "--dataset",
        "digits",
        "--epochs",
        "2",
        "--global-batch-size",
        "64",
        "--checkpoint-dir",
        "/checkpoints",
    ],
    volume_mounts=[client.V1VolumeMount(name="checkpoints", mount_path="/checkpoints")],
)
template = client.V1PodTemplateSpec(
    spec=client.V1PodSpec(
        containers=[container],
        volumes=[client.V1Volume(name="checkpoints", empty_dir=client.V1EmptyDirVolumeSource())],
    )
)
job = models.KubeflowOrgV1TFJob(
    api_version="kubeflow.org/v1",
    kind="TFJob",
    metadata=client.V1ObjectMeta(name=name, namespace=namespace),
    spec=models.KubeflowOrgV1TFJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="Running"),
        tf_replica_specs={
            "Worker": models.KubeflowOrgV1ReplicaSpec(replicas=2, restart_policy="OnFailure", template=template)
        },
    ),
)
trainer.create_job(job)
listed = [item.metadata.name for item in trainer.list_jobs()]
fetched = trainer.get_job(name)
trainer.wait_for_job_conditions(name, expected_conditions={"Succeeded"}, wait_timeout=600, polling_interval=2)
succeeded = trainer.is_job_succeeded(name)
done = trainer.get_job(name)
pods = [pod.metadata.name for pod in trainer.get_job_pods(name)]
master = [pod.metadata.name for pod in trainer.get_job_pods(name, is_master=True)]
logs, _ = trainer.get_job_logs(name)
trainer.delete_job(name)
Path(result_file).write_text(
    json.dumps(
        {
            "listed": listed,
            "fetched": fetched.metadata.name,
            "succeeded": succeeded,
            "conditions": [(c.type, c.status, c.reason) for c in done.status.conditions],
            "replica_statuses": {kind: status.succeeded for kind, status in done.status.replica_statuses.items()},
            "completion_time": str(done.status.completion_time),
            "pods": sorted(pods),
            "master": master,
            "logs": {pod: text[-2000:] for pod, text in logs.items()},
        }
    )
)
