"""What every pod that reads a job's checkpoint volume besides its own shares (its TensorBoard, the reader
of logs kept there): the image of the job's TensorFlow container, which can read what its pods wrote,
the trainer pods' user and groups, the claim mounted read-only, and the `restricted` Pod Security
Standard."""

from __future__ import annotations

from disttrain_core import naming
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import trainer_container
from disttrain_core.progress import reporting_task
from disttrain_core.types import Manifest

CONTAINER_SECURITY: Manifest = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _template_spec(job: DistTrainJob) -> Manifest:
    replica_type, _ = reporting_task(job.spec)
    spec: Manifest = job.spec.replica_specs[replica_type].template["spec"]
    return spec


def tensorflow_image(job: DistTrainJob, default: str) -> str:
    """The image of the job's TensorFlow container (the Chief's, else worker 0's), else `default`, the install's
    trainer image, which a container that names none runs."""
    return str(trainer_container(_template_spec(job)["containers"]).get("image") or default)


def claim_name(job: DistTrainJob) -> str:
    assert job.spec.checkpoint is not None
    return job.spec.checkpoint.claim_name or naming.checkpoint_claim_name(job.metadata.name)


def volume_mount(job: DistTrainJob) -> Manifest:
    """The checkpoint volume, read-only, where the job's pods mount it."""
    assert job.spec.checkpoint is not None
    return {"name": naming.CHECKPOINT_VOLUME, "mountPath": job.spec.checkpoint.mount_path, "readOnly": True}


def pod_spec(job: DistTrainJob, container: Manifest) -> Manifest:
    """A pod of `container` (given `volume_mount`) over the job's claim, as the job's trainer pods' user."""
    own = _template_spec(job).get("securityContext") or {}
    kept = {key: own[key] for key in ("runAsUser", "runAsGroup", "fsGroup", "supplementalGroups") if key in own}
    spec: Manifest = {
        "securityContext": {**kept, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{**container, "securityContext": CONTAINER_SECURITY}],
        "volumes": [
            {
                "name": naming.CHECKPOINT_VOLUME,
                "persistentVolumeClaim": {"claimName": claim_name(job), "readOnly": True},
            }
        ],
        "enableServiceLinks": False,
    }
    pulls = _template_spec(job).get("imagePullSecrets")
    if pulls:
        spec["imagePullSecrets"] = pulls
    return spec
