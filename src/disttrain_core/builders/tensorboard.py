"""A job's TensorBoard: a Deployment of one pod reading the summaries on the job's checkpoint volume
(read-only), and a Service `{job}-tensorboard` (`tensorboard_name`) in front of it, both owned by the
job, so they serve its curves after it finished and go when it is deleted (or its TTL runs out).

The trainer writes summaries under `{mountPath}/tensorboard/{job}` (`TENSORBOARD_DIR_ENV`), so the run
TensorBoard lists is named after the job. A Deployment, not a bare pod: its controller replaces a pod
that is evicted or whose node is lost, and says in its conditions why a pod cannot be created (a Pod
Security refusal, a quota), which the job's `TensorBoardReady` condition repeats. The pod passes the
`restricted` Pod Security Standard, mounts no ServiceAccount token, and a NetworkPolicy admits only
the job's own namespace to it.
"""

from __future__ import annotations

from disttrain_core import naming
from disttrain_core.api.job import GROUP, DistTrainJob
from disttrain_core.builders import volume_readers
from disttrain_core.types import Manifest

TENSORBOARD_DIR_ENV = "DISTTRAIN_TENSORBOARD_DIR"
TENSORBOARD_PORT = 6006
TENSORBOARD_PORT_NAME = "http"
TENSORBOARD_OF_LABEL = f"{GROUP}/tensorboard-of"  # on its pod: not the job-name label its headless Service selects
PROGRESS_DEADLINE_SECONDS = 300  # then the Deployment says it did not become available, and so does the job
DEFAULT_RESOURCES: Manifest = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}


def tensorboard_name(job_name: str) -> str:
    """Its Deployment's and Service's: `{job}-tensorboard`, shortened with a hash where that is over 63."""
    return naming.label_name(job_name, "tensorboard")


def summaries_root(job: DistTrainJob) -> str:
    """TensorBoard's logdir: each run under it is one job's summaries."""
    assert job.spec.checkpoint is not None
    return f"{job.spec.checkpoint.mount_path.rstrip('/')}/tensorboard"


def summaries_dir(job: DistTrainJob) -> str:
    """Where the trainer writes: the run named after the job."""
    return f"{summaries_root(job)}/{job.metadata.name}"


def deployment(job: DistTrainJob, metadata: Manifest, trainer_image: str) -> Manifest:
    """`metadata`: the job's child's (name, namespace, labels, owner); `trainer_image`: the install's."""
    assert job.spec.tensorboard is not None
    selector = {TENSORBOARD_OF_LABEL: job.metadata.name}
    probe = {"httpGet": {"path": "/", "port": TENSORBOARD_PORT_NAME}, "periodSeconds": 5}
    container: Manifest = {
        "name": "tensorboard",
        "image": job.spec.tensorboard.image or volume_readers.tensorflow_image(job, trainer_image),
        "command": ["tensorboard"],
        "args": ["--logdir", summaries_root(job), "--bind_all", "--port", str(TENSORBOARD_PORT), "--load_fast=false"],
        "ports": [{"name": TENSORBOARD_PORT_NAME, "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
        "readinessProbe": probe,
        "resources": job.spec.tensorboard.resources or DEFAULT_RESOURCES,
        "volumeMounts": [volume_readers.volume_mount(job)],
    }
    pod_spec = {**volume_readers.pod_spec(job, container), "automountServiceAccountToken": False}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": PROGRESS_DEADLINE_SECONDS,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": selector}, "spec": pod_spec},
        },
    }


def service(job: DistTrainJob, metadata: Manifest) -> Manifest:
    port = {"name": TENSORBOARD_PORT_NAME, "port": TENSORBOARD_PORT, "targetPort": TENSORBOARD_PORT_NAME}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"selector": {TENSORBOARD_OF_LABEL: job.metadata.name}, "ports": [{**port, "protocol": "TCP"}]},
    }


def network_policy(job: DistTrainJob, metadata: Manifest) -> Manifest:
    """Only pods of the job's own namespace reach its TensorBoard (where the cluster's network enforces
    NetworkPolicy); `kubectl port-forward` enters the pod's own network and needs no rule."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": {
            "podSelector": {"matchLabels": {TENSORBOARD_OF_LABEL: job.metadata.name}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}], "ports": [{"port": TENSORBOARD_PORT_NAME, "protocol": "TCP"}]}],
        },
    }


def trainer_env(job: DistTrainJob) -> list[Manifest]:
    """Where the trainer writes its summaries; only the Chief (worker 0 without one) writes any."""
    if not job.spec.tensorboard_enabled:
        return []
    return [{"name": TENSORBOARD_DIR_ENV, "value": summaries_dir(job)}]
