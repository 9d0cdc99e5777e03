"""What a pod that asks for GPUs needs and no Kubernetes default gives it: a /dev/shm of a useful size, and
NCCL's settings.

A container runtime gives every container a /dev/shm of 64M; NCCL keeps about 33M of buffers there per
communicator, and MultiWorkerMirrored over NCCL fails to allocate in it (NVIDIA/nccl#525). A trainer container
that asks for GPUs gets a memory-backed emptyDir there (`ReplicaSpec.shared_memory`, else
`DEFAULT_SHARED_MEMORY`, at most half its memory limit), unless its template mounts something at /dev/shm
already; and the job's `nccl` settings as environment variables, each unless the template sets it.
"""

from __future__ import annotations

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.quantity import format_quantity, parse_quantity
from disttrain_core.api.spec import ReplicaType
from disttrain_core.types import Manifest

SHM_PATH = "/dev/shm"
SHM_VOLUME = "disttrain-shm"
DEFAULT_SHARED_MEMORY = "1Gi"
# Extended resources that are GPUs or slices of one: NVIDIA's device plugin (MIG slices as nvidia.com/mig-*),
# AMD's and Intel's.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe")
GPU_RESOURCE_PREFIXES = ("nvidia.com/mig-",)


def gpus_asked(container: Manifest) -> bool:
    """The container requests or limits a GPU, or a slice of one."""
    resources = container.get("resources") or {}
    names = {*(resources.get("limits") or {}), *(resources.get("requests") or {})}
    return any(name in GPU_RESOURCES or name.startswith(GPU_RESOURCE_PREFIXES) for name in names)


def shared_memory_size(job: DistTrainJob, replica_type: ReplicaType, container: Manifest) -> str:
    """The replica's sharedMemory, else the default, at most half the container's memory limit."""
    asked = job.spec.replica_specs[replica_type].shared_memory
    if asked is not None:
        return asked
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is None:
        return DEFAULT_SHARED_MEMORY
    half = parse_quantity(limit) / 2
    return DEFAULT_SHARED_MEMORY if half >= parse_quantity(DEFAULT_SHARED_MEMORY) else format_quantity(half)


def with_gpu_needs(job: DistTrainJob, replica_type: ReplicaType, pod_spec: Manifest, container: Manifest) -> None:
    """Give the trainer container of a pod that asks for GPUs its /dev/shm and NCCL's settings, in place."""
    if not gpus_asked(container):
        return
    mounts = container.get("volumeMounts") or []
    if not any(mount.get("mountPath", "").rstrip("/") == SHM_PATH for mount in mounts):
        size = shared_memory_size(job, replica_type, container)
        volume = {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}}
        volumes = [entry for entry in pod_spec.get("volumes") or [] if entry.get("name") != SHM_VOLUME]
        pod_spec["volumes"] = [*volumes, volume]
        container["volumeMounts"] = [*mounts, {"name": SHM_VOLUME, "mountPath": SHM_PATH}]
    nccl = job.spec.nccl.env() if job.spec.nccl is not None else {}
    own = {entry.get("name") for entry in container.get("env") or []}
    added = [{"name": name, "value": value} for name, value in nccl.items() if name not in own]
    if added:
        container["env"] = [*(container.get("env") or []), *added]
