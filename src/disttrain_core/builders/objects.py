"""Pure builders of every object a job owns: its Service, its checkpoint PVC and its pods.

The operator creates exactly what these return and `disttrain render` prints exactly the same, so
what users preview is what runs. Nothing here does I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

from disttrain_contract.progress import (
    DEFAULT_TERMINATION_MESSAGE_PATH,
    PROGRESS_PORT_ENV,
    TERMINATION_MESSAGE_ENV,
)
from disttrain_core import kept_logs, naming
from disttrain_core.api import tfjob
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.builders import gpus, network_policy, tensorboard, volume_readers
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GANG_KINDS
from disttrain_core.builders.tfconfig import TFConfigs
from disttrain_core.restarts import in_place
from disttrain_core.types import Manifest, ObjectRef

CHECKPOINT_DIR_ENV = "DISTTRAIN_CHECKPOINT_DIR"

# The operator decides every restart (per restartPolicy, exit code and restartScope) and counts it against
# backoffLimit: it replaces the pod with the same name and TF_CONFIG, or, where the trainer's container has the
# rule of `in_place`, counts the restart the kubelet made in place.
POD_RESTART_POLICY = "Never"
# Created once and never watched: a gang's API may not be served, and a NetworkPolicy never changes.
UNWATCHED_KINDS = GANG_KINDS | {"NetworkPolicy"}


def owner_references(job: DistTrainJob) -> list[Manifest]:
    """The job as controller, so the garbage collector removes its children; none before it has a uid."""
    if job.metadata.uid is None:
        return []
    return [
        {
            "apiVersion": job.api_version,
            "kind": job.kind,
            "name": job.metadata.name,
            "uid": job.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def _metadata(
    job: DistTrainJob, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> Manifest:
    metadata: Manifest = {"name": name, "namespace": job.metadata.namespace, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    owners = owner_references(job)
    if owners:
        metadata["ownerReferences"] = owners
    return metadata


def service(job: DistTrainJob) -> Manifest:
    """Headless, and publishing pods before they are ready: peers must resolve each other to start."""
    port = job.spec.port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(job, naming.service_name(job.metadata.name), naming.job_labels(job.metadata.name)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": naming.job_labels(job.metadata.name),
            "ports": [{"name": naming.TF_PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def checkpoint_claim(job: DistTrainJob) -> Manifest | None:
    """The PVC the operator creates when `checkpoint.size` asks for one; None for an existing claim."""
    checkpoint = job.spec.checkpoint
    if checkpoint is None or checkpoint.size is None:
        return None
    spec: Manifest = {
        "accessModes": [mode.value for mode in checkpoint.effective_access_modes],
        "resources": {"requests": {"storage": checkpoint.size}},
    }
    if checkpoint.storage_class_name:
        spec["storageClassName"] = checkpoint.storage_class_name
    name = naming.checkpoint_claim_name(job.metadata.name)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(job, name, naming.job_labels(job.metadata.name)),
        "spec": spec,
    }


def _replace_named(entries: list[Manifest], additions: list[Manifest]) -> list[Manifest]:
    """Entries with the additions' names replaced by the additions, which go last."""
    names = {entry["name"] for entry in additions}
    return [entry for entry in entries if entry.get("name") not in names] + additions


def _with_port(ports: list[Manifest], name: str, port: int) -> list[Manifest]:
    """The port under our name, unless the template already declares that number."""
    ports = [entry for entry in ports if entry.get("name") != name]
    if any(entry.get("containerPort") == port for entry in ports):
        return ports
    return [*ports, {"name": name, "containerPort": port, "protocol": "TCP"}]


def _progress_env(job: DistTrainJob, container: Manifest) -> list[Manifest]:
    """Where the trainer publishes progress: a port the operator polls and the termination message."""
    message_path = container.get("terminationMessagePath") or DEFAULT_TERMINATION_MESSAGE_PATH
    return [
        {"name": PROGRESS_PORT_ENV, "value": str(job.spec.progress_port)},
        {"name": TERMINATION_MESSAGE_ENV, "value": message_path},
    ]


def _checkpoint_volume(job: DistTrainJob) -> Manifest | None:
    if job.spec.checkpoint is None:
        return None
    return {"name": naming.CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": volume_readers.claim_name(job)}}


def _mount_checkpoint(job: DistTrainJob, pod_spec: Manifest, container: Manifest) -> list[Manifest]:
    """The checkpoint volume in the pod, mounted in the trainer container; the variable naming where."""
    volume = _checkpoint_volume(job)
    if volume is None or job.spec.checkpoint is None:
        return []
    mount_path = job.spec.checkpoint.mount_path
    pod_spec["volumes"] = _replace_named(pod_spec.get("volumes", []), [volume])
    mount = {"name": naming.CHECKPOINT_VOLUME, "mountPath": mount_path}
    container["volumeMounts"] = _replace_named(container.get("volumeMounts", []), [mount])
    return [{"name": CHECKPOINT_DIR_ENV, "value": mount_path}]


def pod(
    job: DistTrainJob,
    replica_type: ReplicaType,
    index: int,
    settings: BuildSettings,
    configs: TFConfigs | None = None,
) -> Manifest:
    """One pod of the job; `configs`: the job's TF_CONFIGs, when more pods than one are built."""
    replica = job.spec.replica_specs[replica_type]
    template = copy.deepcopy(replica.template)
    template_metadata: Manifest = template.get("metadata") or {}
    pod_spec: Manifest = template["spec"]
    name = naming.pod_name(job.metadata.name, replica_type, index)
    labels = {
        **(template_metadata.get("labels") or {}),
        **naming.replica_labels(job.metadata.name, replica_type, index),
    }
    if job.kind == tfjob.KIND:
        has_chief = job.spec.replicas(ReplicaType.CHIEF) > 0
        labels.update(naming.kubeflow_replica_labels(job.metadata.name, replica_type, index, has_chief))

    membership = settings.gang.membership(job, replica_type)
    if membership is not None:
        if membership.scheduler_name is not None:
            pod_spec["schedulerName"] = membership.scheduler_name
        pod_spec.update(membership.pod_spec)
        labels.update(membership.labels)
        template_metadata["annotations"] = {**(template_metadata.get("annotations") or {}), **membership.annotations}
    policy = job.spec.run_policy.scheduling_policy
    if policy is not None and policy.priority_class:
        pod_spec["priorityClassName"] = policy.priority_class
    pod_spec["hostname"] = name
    pod_spec["subdomain"] = naming.service_name(job.metadata.name)
    pod_spec["restartPolicy"] = POD_RESTART_POLICY
    grace = job.spec.run_policy.termination_grace_period_seconds
    if grace is not None:
        pod_spec["terminationGracePeriodSeconds"] = grace

    env: list[Manifest] = []
    tf_config = (configs or TFConfigs(job, settings)).json(replica_type, index)
    if tf_config is not None:
        env.append({"name": "TF_CONFIG", "value": tf_config})
    container = trainer_container(pod_spec["containers"])
    if not container.get("image"):  # the CRD lets the container named tensorflow leave it to the install
        container["image"] = settings.trainer_image
    env += _mount_checkpoint(job, pod_spec, container)
    env += _progress_env(job, container) + tensorboard.trainer_env(job)
    env += kept_logs.trainer_env(job, replica_type, index)
    container["env"] = _replace_named(container.get("env", []), env)
    gpus.with_gpu_needs(job, replica_type, pod_spec, container)
    container["ports"] = _with_port(container.get("ports", []), naming.TF_PORT_NAME, job.spec.port)
    container["ports"] = _with_port(container["ports"], naming.PROGRESS_PORT_NAME, job.spec.progress_port)

    annotations = kept_logs.pod_annotations(job, replica_type, index, template_metadata.get("annotations"))
    restarts_in_place = in_place.restarts_in_place(job, replica_type, settings.restart_in_place)
    if restarts_in_place and in_place.with_restart_rule(container, in_place.restart_codes(job, replica_type)):
        annotations.update(in_place.counted_annotation(0))
    metadata = _metadata(job, name, labels, annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def pods(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    configs = TFConfigs(job, settings)
    return [
        pod(job, replica_type, index, settings, configs)
        for replica_type in ReplicaType
        for index in range(job.spec.replicas(replica_type))
    ]


def gang(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    labels = naming.job_labels(job.metadata.name)
    return [
        {**item, "metadata": _metadata(job, item["metadata"]["name"], labels)} for item in settings.gang.objects(job)
    ]


def trainer_network_policy(job: DistTrainJob, settings: BuildSettings) -> Manifest | None:
    """The job's NetworkPolicy (`network_policy`), made before any pod; None where the install turned it off."""
    if not settings.network_policy:
        return None
    name = naming.trainer_policy_name(job.metadata.name)
    return network_policy.network_policy(job, settings, _metadata(job, name, naming.job_labels(job.metadata.name)))


def tensorboard_objects(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    """The job's TensorBoard Deployment, Service and NetworkPolicy, if it asks for one."""
    if not job.spec.tensorboard_enabled or job.spec.checkpoint is None:
        return []
    name = tensorboard.tensorboard_name(job.metadata.name)
    labels = naming.job_labels(job.metadata.name)
    return [
        tensorboard.deployment(job, _metadata(job, name, labels), settings.trainer_image),
        tensorboard.service(job, _metadata(job, name, labels)),
        tensorboard.network_policy(job, _metadata(job, name, labels)),
    ]


Build = Callable[[], Manifest]


def owned_objects(job: DistTrainJob, settings: BuildSettings) -> Iterator[tuple[ObjectRef, Build]]:
    """Everything the job owns, in creation order (Service, its NetworkPolicy, PVC, its gang: a PodGroup, or a
    Workload and its PodGroup; then pods by type and index, then its TensorBoard), each named before it is
    built: a pod, large in a large job, is built only by whoever wants it."""
    configs = TFConfigs(job, settings)
    small = [service(job), trainer_network_policy(job, settings), checkpoint_claim(job), *gang(job, settings)]
    for item in small:
        if item is not None:
            yield object_key(item), _built(item)
    for replica_type in ReplicaType:
        for index in range(job.spec.replicas(replica_type)):
            name = naming.pod_name(job.metadata.name, replica_type, index)
            yield ObjectRef("Pod", name), _pod_builder(job, replica_type, index, settings, configs)
    for item in tensorboard_objects(job, settings):
        yield object_key(item), _built(item)


def object_key(manifest: Manifest) -> ObjectRef:
    return ObjectRef(str(manifest["kind"]), str(manifest["metadata"]["name"]))


def _built(manifest: Manifest) -> Build:
    return lambda: manifest


def _pod_builder(
    job: DistTrainJob, replica_type: ReplicaType, index: int, settings: BuildSettings, configs: TFConfigs
) -> Build:
    return lambda: pod(job, replica_type, index, settings, configs)


def desired_objects(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    """Everything the job owns, built, in creation order (`owned_objects`)."""
    return [build() for _, build in owned_objects(job, settings)]
