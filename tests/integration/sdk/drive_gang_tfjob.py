"""training-operator's own gang e2e flow (`test_sdk_e2e_with_gang_scheduling` in its SDK's tests), with
Kubeflow's SDK unchanged: a one-worker TFJob asking for a gang of 10 must reach Created and stay not Running
(checked 3 times, 5 s apart, as its `verify_unschedulable_job_e2e` does); `update_job` then lowers
minAvailable to 1 and the job must succeed. Writes what it saw as JSON (stdout is the SDK's).
`drive_gang_tfjob.py KUBECONFIG NAMESPACE NAME RESULT_FILE`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kubeflow.training import TrainingClient, models
from kubernetes import client

kubeconfig, namespace, name, result_file = sys.argv[1:5]
trainer = TrainingClient(config_file=kubeconfig, namespace=namespace, job_kind="TFJob")
container = client.V1Container(name="tensorflow", image="none", command=["sh", "-c", "echo trained"])
worker = models.KubeflowOrgV1ReplicaSpec(
    replicas=1, restart_policy="Never", template=client.V1PodTemplateSpec(spec=client.V1PodSpec(containers=[container]))
)


def tfjob(min_available: int) -> models.KubeflowOrgV1TFJob:
    return models.KubeflowOrgV1TFJob(
        api_version="kubeflow.org/v1",
        kind="TFJob",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        spec=models.KubeflowOrgV1TFJobSpec(
            run_policy=models.KubeflowOrgV1RunPolicy(
                clean_pod_policy="None",
                scheduling_policy=models.KubeflowOrgV1SchedulingPolicy(min_available=min_available),
            ),
            tf_replica_specs={"Worker": worker},
        ),
    )


trainer.create_job(tfjob(10))
job = trainer.wait_for_job_conditions(name, expected_conditions={"Created"}, wait_timeout=120, polling_interval=1)
held = []
for _ in range(3):
    job = trainer.get_job(name)
    held.append({"created": trainer.is_job_created(job=job), "running": trainer.is_job_running(job=job)})
    time.sleep(5)
pods_held = [pod.metadata.name for pod in trainer.get_job_pods(name)]
conditions_held = [(c.type, c.status, c.reason, c.message) for c in trainer.get_job(name).status.conditions]
trainer.update_job(tfjob(1), name, namespace)
trainer.wait_for_job_conditions(name, expected_conditions={"Succeeded"}, wait_timeout=300, polling_interval=1)
done = trainer.get_job(name)
trainer.delete_job(name)
Path(result_file).write_text(
    json.dumps(
        {
            "held": held,
            "pods_held": pods_held,
            "conditions_held": conditions_held,
            "succeeded": trainer.is_job_succeeded(job=done),
        }
    )
)
