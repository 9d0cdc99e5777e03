"""What a pod that asks for GPUs is given: a memory-backed /dev/shm of a useful size, and NCCL's settings."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import pod
from disttrain_core.types import Manifest
from support.builder_inputs import built_job, replica_spec, unchecked_job


def _gpu_pod(replica: dict[str, Any], **spec: Any) -> Manifest:
    return pod(built_job({"replicaSpecs": {"Worker": replica}, **spec}), ReplicaType.WORKER, 0, BuildSettings())


def _shm(manifest: Manifest) -> tuple[list[Manifest], list[Manifest]]:
    container = trainer_container(manifest["spec"]["containers"])
    mounts = [mount for mount in container.get("volumeMounts", []) if mount["mountPath"] == "/dev/shm"]
    names = {mount["name"] for mount in mounts}
    return mounts, [volume for volume in manifest["spec"].get("volumes", []) if volume["name"] in names]


def test_a_pod_that_asks_for_gpus_gets_a_memory_backed_dev_shm_and_no_other_pod_does() -> None:
    """A container runtime's /dev/shm is 64M, where NCCL's buffers do not fit."""
    gpu = _gpu_pod(replica_spec(1, resources={"limits": {"nvidia.com/gpu": 2}}))
    mounts, volumes = _shm(gpu)
    assert mounts == [{"name": "disttrain-shm", "mountPath": "/dev/shm"}]
    assert volumes == [{"name": "disttrain-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    mig = _gpu_pod(replica_spec(1, resources={"limits": {"nvidia.com/mig-1g.10gb": 1}}))  # one MIG slice
    assert _shm(mig)[1][0]["emptyDir"]["sizeLimit"] == "1Gi"
    assert _shm(_gpu_pod(replica_spec(1)))[0] == []  # no GPU: nothing
    sized = _gpu_pod({**replica_spec(1, resources={"limits": {"nvidia.com/gpu": 1}}), "sharedMemory": "8Gi"})
    assert _shm(sized)[1][0]["emptyDir"]["sizeLimit"] == "8Gi"
    small = _gpu_pod(replica_spec(1, resources={"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}}))
    assert _shm(small)[1][0]["emptyDir"]["sizeLimit"] == str(512 * 1024**2)  # half the memory limit at most


def test_a_template_that_mounts_its_own_dev_shm_keeps_it() -> None:
    own = {"volumeMounts": [{"name": "mine", "mountPath": "/dev/shm"}], "resources": {"limits": {"nvidia.com/gpu": 1}}}
    replica = replica_spec(1, **own)
    replica["template"]["spec"]["volumes"] = [{"name": "mine", "emptyDir": {"medium": "Memory"}}]
    mounts, volumes = _shm(_gpu_pod(replica))
    assert mounts == [{"name": "mine", "mountPath": "/dev/shm"}] and volumes == [
        {"name": "mine", "emptyDir": {"medium": "Memory"}}
    ]


def test_nccl_settings_reach_the_gpu_pods_and_a_templates_own_variables_stand() -> None:
    env = [{"name": "NCCL_DEBUG", "value": "TRACE"}, {"name": "NCCL_ALGO", "value": "Ring"}]
    replica = replica_spec(1, env=env, resources={"limits": {"nvidia.com/gpu": 1}})
    nccl = {"debug": "INFO", "socketIfname": "^lo,docker", "ibDisable": True}
    built = trainer_container(_gpu_pod(replica, nccl=nccl)["spec"]["containers"])
    values = {entry["name"]: entry.get("value") for entry in built["env"]}
    assert (values["NCCL_DEBUG"], values["NCCL_ALGO"]) == ("TRACE", "Ring")  # the template's, passed through
    assert (values["NCCL_SOCKET_IFNAME"], values["NCCL_IB_DISABLE"]) == ("^lo,docker", "1")
    assert "NCCL_P2P_DISABLE" not in values
    cpu = trainer_container(_gpu_pod(replica_spec(1), nccl=nccl)["spec"]["containers"])
    assert not any(entry["name"].startswith("NCCL_") for entry in cpu["env"])


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"nccl": {"debug": "LOUD"}}, "spec.nccl.debug"),
        ({"nccl": {"socketIfname": "eth0; rm -rf /"}}, "spec.nccl.socketIfname"),
        ({"nccl": {"NCCL_DEBUG": "INFO"}}, "spec.nccl.NCCL_DEBUG"),
    ],
)
def test_an_nccl_setting_that_is_no_valid_value_is_refused_by_the_schema(spec: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidManifestError, match=words.replace(".", r"\.")):
        built_job({"replicaSpecs": {"Worker": replica_spec(1)}, **spec})


def test_more_shared_memory_than_the_memory_limit_is_refused_saying_so() -> None:
    """A memory-backed /dev/shm counts against the container's memory limit: the kubelet would evict the pod."""
    replica = {**replica_spec(1, resources={"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}}), "sharedMemory": "8Gi"}
    with pytest.raises(ValueError, match="sharedMemory 8Gi is more than the trainer container's memory limit 4Gi"):
        unchecked_job({"replicaSpecs": {"Worker": replica}})
    with pytest.raises(InvalidManifestError, match="sharedMemory"):
        built_job({"replicaSpecs": {"Worker": {**replica, "sharedMemory": "lots"}}})
