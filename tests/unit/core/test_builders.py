"""What the builders produce: golden files for every example, and the rules behind them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from disttrain_cli.render import render
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler, WorkloadApi, min_resources
from disttrain_core.builders.objects import desired_objects, pod
from disttrain_core.served import job_manifest
from disttrain_core.types import Manifest
from support.job_builder import JobBuilder
from support.repository import EXAMPLES, ROOT, load_one

GOLDEN = ROOT / "tests" / "golden"
DEFAULT = BuildSettings()


def _job(spec: dict[str, Any], name: str = "demo", namespace: str = "team", uid: str | None = None) -> DistTrainJob:
    return JobBuilder(name, namespace).metadata(**({"uid": uid} if uid else {})).spec(**spec).job()


def _unchecked_job(spec: dict[str, Any]) -> DistTrainJob:
    """A job as the models read it, without the CRD's rules: as the operator reads a served TFJob."""
    return JobBuilder("demo", "team").spec(**spec).model()


def _replica(replicas: int, **container: Any) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i", **container}]}},
    }


def _tf_config(manifest: Manifest) -> dict[str, Any] | None:
    env = trainer_container(manifest["spec"]["containers"]).get("env", [])
    values = [entry["value"] for entry in env if entry["name"] == "TF_CONFIG"]
    return json.loads(values[0]) if values else None


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_render_matches_golden(example: Path, update_golden: bool) -> None:
    golden = GOLDEN / example.name
    rendered = render(example.read_text(), DEFAULT)
    if update_golden:
        golden.write_text(rendered)
    assert rendered == golden.read_text()


def test_render_is_deterministic() -> None:
    text = EXAMPLES[0].read_text()
    assert render(text, DEFAULT) == render(text, DEFAULT)


def test_parameter_server_objects() -> None:
    job = parse_job(load_one(ROOT / "examples" / "parameter-server.yaml"))
    objects = desired_objects(job, DEFAULT)
    kinds = [(item["kind"], item["metadata"]["name"]) for item in objects]
    assert kinds == [
        ("Service", "census-ps"),
        ("NetworkPolicy", "census-ps"),
        ("Pod", "census-ps-chief-0"),
        ("Pod", "census-ps-worker-0"),
        ("Pod", "census-ps-worker-1"),
        ("Pod", "census-ps-ps-0"),
        ("Pod", "census-ps-ps-1"),
        ("Pod", "census-ps-evaluator-0"),
    ]
    service = objects[0]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    for item in objects[2:]:
        assert item["spec"]["hostname"] == item["metadata"]["name"]
        assert item["spec"]["subdomain"] == "census-ps"
        assert item["metadata"]["namespace"] == "default"
        volumes = item["spec"]["volumes"]
        assert volumes == [{"name": "disttrain-checkpoint", "persistentVolumeClaim": {"claimName": "team-checkpoints"}}]


def test_training_tasks_do_not_see_the_evaluator_but_it_sees_them() -> None:
    job = _job({"replicaSpecs": {"Chief": _replica(1), "Worker": _replica(2), "Evaluator": _replica(1)}})
    chief = _tf_config(pod(job, ReplicaType.CHIEF, 0, DEFAULT))
    evaluator = _tf_config(pod(job, ReplicaType.EVALUATOR, 0, DEFAULT))
    assert chief is not None and evaluator is not None
    assert set(chief["cluster"]) == {"chief", "worker"}
    assert evaluator["cluster"] == {**chief["cluster"], "evaluator": ["demo-evaluator-0.demo.team.svc:2222"]}
    assert evaluator["task"] == {"type": "evaluator", "index": 0}
    assert chief["environment"] == "cloud"


def test_single_replica_has_no_tf_config() -> None:
    job = _job({"strategy": "Mirrored", "replicaSpecs": {"Chief": _replica(1)}})
    assert _tf_config(pod(job, ReplicaType.CHIEF, 0, DEFAULT)) is None


def test_cluster_domain_and_port() -> None:
    job = _job({"replicaSpecs": {"Worker": _replica(2)}, "port": 4444})
    config = _tf_config(pod(job, ReplicaType.WORKER, 1, BuildSettings(cluster_domain="corp.example")))
    assert config is not None
    assert config["cluster"]["worker"][1] == "demo-worker-1.demo.team.svc.corp.example:4444"
    assert config["task"] == {"type": "worker", "index": 1}


def test_tensorflow_container_is_chosen_by_name() -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "sidecar", "image": "s"},
                {
                    "name": "tensorflow",
                    "image": "t",
                    "env": [{"name": "TF_CONFIG", "value": "stale"}, {"name": "A", "value": "1"}],
                },
            ]
        }
    }
    job = _job({"replicaSpecs": {"Worker": {"replicas": 2, "template": template}}})
    built = pod(job, ReplicaType.WORKER, 0, DEFAULT)
    sidecar, tensorflow = built["spec"]["containers"]
    assert "env" not in sidecar and "ports" not in sidecar
    names = [entry["name"] for entry in tensorflow["env"]]
    assert names == ["A", "TF_CONFIG", "DISTTRAIN_PROGRESS_PORT", "DISTTRAIN_TERMINATION_MESSAGE_PATH"]
    assert [port["name"] for port in tensorflow["ports"]] == ["tf-port", "progress"]


def test_first_container_without_a_tensorflow_one_and_user_port_kept() -> None:
    job = _job({"replicaSpecs": {"Worker": _replica(2, name="main", ports=[{"name": "grpc", "containerPort": 2222}])}})
    container = pod(job, ReplicaType.WORKER, 0, DEFAULT)["spec"]["containers"][0]
    assert container["ports"] == [
        {"name": "grpc", "containerPort": 2222},
        {"name": "progress", "containerPort": 9471, "protocol": "TCP"},
    ]
    assert any(entry["name"] == "TF_CONFIG" for entry in container["env"])


def test_resources_are_carried_untouched() -> None:
    resources = {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"}, "requests": {"cpu": "500m"}}
    job = _job({"replicaSpecs": {"Worker": _replica(2, resources=resources)}})
    assert pod(job, ReplicaType.WORKER, 1, DEFAULT)["spec"]["containers"][0]["resources"] == resources


def test_pods_never_restart_in_place_the_operator_decides() -> None:
    for policy in ("Never", "ExitCode", "OnFailure", "Always"):
        job = _job({"replicaSpecs": {"Worker": {**_replica(2), "restartPolicy": policy}}})
        assert pod(job, ReplicaType.WORKER, 0, DEFAULT)["spec"]["restartPolicy"] == "Never"


def test_the_run_policy_s_grace_period_is_every_pod_s_and_else_the_template_s_own() -> None:
    """The time a pod taken away has to save: one field for every replica, over what a template says."""
    own = {
        **_replica(2),
        "template": {"spec": {"terminationGracePeriodSeconds": 45, "containers": [{"name": "c", "image": "i"}]}},
    }
    job = _job({"replicaSpecs": {"Worker": own, "Chief": _replica(1)}})
    assert pod(job, ReplicaType.WORKER, 0, DEFAULT)["spec"]["terminationGracePeriodSeconds"] == 45
    assert "terminationGracePeriodSeconds" not in pod(job, ReplicaType.CHIEF, 0, DEFAULT)["spec"]
    replicas = {"Worker": own, "Chief": _replica(1)}
    job = _job({"replicaSpecs": replicas, "runPolicy": {"terminationGracePeriodSeconds": 120}})
    graces = {pod(job, kind, 0, DEFAULT)["spec"]["terminationGracePeriodSeconds"] for kind in job.spec.replica_specs}
    assert graces == {120}


def test_owner_references_once_the_job_has_a_uid() -> None:
    spec = {"replicaSpecs": {"Worker": _replica(2)}, "checkpoint": {"size": "1Gi"}}
    assert all("ownerReferences" not in item["metadata"] for item in desired_objects(_job(spec), DEFAULT))
    for item in desired_objects(_job(spec, uid="1234"), DEFAULT):
        (owner,) = item["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "disttrain.io/v1alpha1",
            "kind": "DistTrainJob",
            "name": "demo",
            "uid": "1234",
            "controller": True,
            "blockOwnerDeletion": True,
        }


def test_created_checkpoint_claim() -> None:
    spec = {"replicaSpecs": {"Worker": _replica(2)}, "checkpoint": {"size": "5Gi", "storageClassName": "fast"}}
    claim, *_ = (item for item in desired_objects(_job(spec), DEFAULT) if item["kind"] == "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "demo-checkpoint"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "5Gi"}},
        "storageClassName": "fast",
    }
    worker = pod(_job(spec), ReplicaType.WORKER, 0, DEFAULT)
    container = worker["spec"]["containers"][0]
    assert container["volumeMounts"] == [{"name": "disttrain-checkpoint", "mountPath": "/checkpoints"}]
    assert {"name": "DISTTRAIN_CHECKPOINT_DIR", "value": "/checkpoints"} in container["env"]


def test_labels_merge_template_labels() -> None:
    template = {
        "metadata": {"labels": {"team": "ml", "disttrain.io/job-name": "spoofed"}},
        "spec": {"containers": [{"name": "t", "image": "i"}]},
    }
    job = _job({"replicaSpecs": {"Worker": {"replicas": 2, "template": template}}})
    labels = pod(job, ReplicaType.WORKER, 1, DEFAULT)["metadata"]["labels"]
    assert labels == {
        "team": "ml",
        "disttrain.io/job-name": "demo",
        "disttrain.io/replica-type": "worker",
        "disttrain.io/replica-index": "1",
    }


def test_builders_do_not_mutate_the_job() -> None:
    job = _job({"replicaSpecs": {"Worker": _replica(2)}, "checkpoint": {"size": "1Gi"}})
    before = job.model_dump()
    desired_objects(job, DEFAULT)
    assert job.model_dump() == before


def test_pod_group_for_each_gang_scheduler() -> None:
    spec = {
        "replicaSpecs": {
            "Worker": _replica(3, resources={"limits": {"nvidia.com/gpu": 2}, "requests": {"cpu": "500m"}})
        },
        "runPolicy": {"schedulingPolicy": {"queue": "research", "priorityClass": "high"}},
    }
    job = _job(spec)
    plugins = [item for item in desired_objects(job, DEFAULT) if item["kind"] == "PodGroup"]
    assert plugins[0]["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert plugins[0]["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "1500m", "nvidia.com/gpu": "6"},
        "priorityClassName": "high",
    }
    volcano_settings = BuildSettings(gang_scheduler=GangScheduler.VOLCANO)
    (volcano,) = [item for item in desired_objects(job, volcano_settings) if item["kind"] == "PodGroup"]
    assert (volcano["apiVersion"], volcano["spec"]["queue"]) == ("scheduling.volcano.sh/v1beta1", "research")
    member = pod(job, ReplicaType.WORKER, 0, volcano_settings)
    assert member["spec"]["schedulerName"] == "volcano"
    assert member["spec"]["priorityClassName"] == "high"
    assert member["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "demo"
    assert not [
        item
        for item in desired_objects(_job({"replicaSpecs": {"Worker": _replica(1)}}), DEFAULT)
        if item["kind"] == "PodGroup"
    ]


def _gang_objects(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    return [item for item in desired_objects(job, settings) if item["kind"] == "PodGroup"]


def test_the_operator_can_make_every_job_a_gang_which_a_job_can_refuse() -> None:
    by_default = BuildSettings(gang_by_default=True)
    plain = _job({"replicaSpecs": {"Chief": _replica(1), "Worker": _replica(3)}})
    (group,) = _gang_objects(plain, by_default)
    assert group["spec"]["minMember"] == 4  # every pod, as training-operator's gangs ask
    assert (
        pod(plain, ReplicaType.WORKER, 2, by_default)["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"
    )
    assert not _gang_objects(plain, DEFAULT)

    refusing = _job({"replicaSpecs": {"Worker": _replica(2)}, "runPolicy": {"gang": False}})
    assert not _gang_objects(refusing, by_default)
    assert "schedulerName" not in pod(refusing, ReplicaType.WORKER, 0, by_default)["spec"]
    asking = _job({"replicaSpecs": {"Worker": _replica(2)}, "runPolicy": {"gang": True}})
    assert [group["spec"]["minMember"] for group in _gang_objects(asking, DEFAULT)] == [2]


def test_a_served_tfjob_is_a_gang_where_the_operator_makes_every_job_one() -> None:
    """As under training-operator with --gang-scheduler-name: no schedulingPolicy needed."""
    container = {"name": "tensorflow", "image": "i"}
    replica = {"replicas": 2, "template": {"spec": {"containers": [container]}}}
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "served", "namespace": "team"},
        "spec": {"tfReplicaSpecs": {"Worker": replica}},
    }
    job = DistTrainJob.model_validate(job_manifest(body))  # as the operator reads a served TFJob
    settings = BuildSettings(gang_scheduler=GangScheduler.VOLCANO, gang_by_default=True)
    (group,) = _gang_objects(job, settings)
    assert (group["apiVersion"], group["spec"]["minMember"]) == ("scheduling.volcano.sh/v1beta1", 2)
    assert pod(job, ReplicaType.WORKER, 1, settings)["spec"]["schedulerName"] == "volcano"


def test_a_gang_that_asks_for_more_pods_than_it_has_is_not_cut_to_its_size_but_held() -> None:
    """minAvailable above the job's pods is a gang no scheduler could ever place: nothing of it is made (its
    pods wait, `gang_status`), where it used to be cut silently to the job's size."""
    job = _unchecked_job(
        {"replicaSpecs": {"Worker": _replica(2)}, "runPolicy": {"schedulingPolicy": {"minAvailable": 5}}}
    )
    for scheduler in GangScheduler:
        gang = BuildSettings(gang_scheduler=scheduler).gang
        assert gang.objects(job) == [], scheduler
        assert gang.oversized(job) == (
            "schedulingPolicy.minAvailable 5 is more than the 2 pods of the job: its gang could never be placed, "
            "so its pods wait until minAvailable is lowered"
        )


@pytest.mark.parametrize("scheduler", list(GangScheduler))
def test_every_scheduler_s_gang_counts_what_the_crd_counts_the_training_pods_and_no_evaluator(
    scheduler: GangScheduler,
) -> None:
    """The CRD's rule bounds minAvailable by the Chief, Worker and PS pods; every scheduler's gang is those pods,
    the Evaluator's pod outside it. A served TFJob's minAvailable that counts its Evaluator too, as
    training-operator's did, asks for the whole training gang, not for a gang that is never placed."""
    spec = {"replicaSpecs": {"Worker": _replica(2), "Evaluator": _replica(1)}}
    within = _job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}})
    with pytest.raises(InvalidManifestError, match="minAvailable is more than the job's Chief, Worker and PS pods"):
        _job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 3}}})
    counting = _unchecked_job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 3}}})
    settings = BuildSettings(gang_scheduler=scheduler, workload_api=WorkloadApi.V1BETA1)
    for job in (within, counting):
        gang = settings.gang
        assert gang.oversized(job) is None and gang.min_count(job) == 2 == gang.members(job)
        objects = [item for item in desired_objects(job, settings) if item["kind"] in ("PodGroup", "Workload")]
        assert objects, scheduler
        assert settings.gang.membership(job, ReplicaType.WORKER) is not None
        assert settings.gang.membership(job, ReplicaType.EVALUATOR) is None
        evaluator = pod(job, ReplicaType.EVALUATOR, 0, settings)
        assert "schedulingGroup" not in evaluator["spec"] and "schedulerName" not in evaluator["spec"]


_GANG_SPEC = {
    "strategy": "ParameterServer",
    "replicaSpecs": {"Chief": _replica(1), "Worker": _replica(4), "PS": _replica(2), "Evaluator": _replica(1)},
    "runPolicy": {"schedulingPolicy": {"priorityClass": "high"}},
}
_OWNER = {"apiGroup": "disttrain.io", "kind": "DistTrainJob", "name": "demo"}


def _native_gang(api: WorkloadApi | None, spec: dict[str, Any] = _GANG_SPEC) -> tuple[list[Manifest], dict[str, Any]]:
    """The gang objects and every pod's spec, by name, under Kubernetes' own gangs of `api`."""
    built = desired_objects(
        _job(spec, uid="u1"), BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=api)
    )
    gang = [item for item in built if item["kind"] in ("Workload", "PodGroup")]
    return gang, {item["metadata"]["name"]: item["spec"] for item in built if item["kind"] == "Pod"}


def test_kubernetes_gangs_are_a_workload_and_its_pod_group_which_every_pod_but_the_evaluator_joins() -> None:
    """Kubernetes 1.37's v1beta1 (the default): the PodGroup names its Workload's template in workloadRef, and a
    ParameterServer job, whose PS failure restarts the Chief and workers but not itself, asks for no
    disruptionMode."""
    built = desired_objects(_job(_GANG_SPEC, uid="u1"), BuildSettings(gang_scheduler=GangScheduler.KUBERNETES))
    assert [item["kind"] for item in built[:4]] == ["Service", "NetworkPolicy", "Workload", "PodGroup"]  # before pods
    (workload, group), pods = _native_gang(WorkloadApi.V1BETA1)
    gang = {"schedulingPolicy": {"gang": {"minCount": 7}}, "priorityClassName": "high"}  # 1 + 4 + 2
    assert workload["apiVersion"] == group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert workload["spec"] == {"controllerRef": _OWNER, "podGroupTemplates": [{"name": "gang", **gang}]}
    assert group["spec"] == {"workloadRef": {"workloadName": "demo", "templateName": "gang"}, **gang}
    assert workload["metadata"]["ownerReferences"][0]["uid"] == group["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert {name for name, pod_spec in pods.items() if pod_spec.get("schedulingGroup") == {"podGroupName": "demo"}} == (
        set(pods) - {"demo-evaluator-0"}
    )
    assert all(
        "schedulerName" not in pod_spec and pod_spec["priorityClassName"] == "high" for pod_spec in pods.values()
    )
    fewer = {**_GANG_SPEC, "runPolicy": {"schedulingPolicy": {"minAvailable": 3}}}
    (_, smaller), _ = _native_gang(WorkloadApi.V1BETA1, fewer)
    assert smaller["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert "schedulingConstraints" not in smaller["spec"]
    racked = {**_GANG_SPEC, "runPolicy": {"schedulingPolicy": {"topologyKey": "example.com/rack"}}}
    in_one_rack, _ = _native_gang(WorkloadApi.V1BETA1, racked)
    constraints = {"topology": [{"key": "example.com/rack"}]}
    assert in_one_rack[0]["spec"]["podGroupTemplates"][0]["schedulingConstraints"] == constraints
    assert in_one_rack[1]["spec"]["schedulingConstraints"] == constraints


def test_a_job_that_restarts_as_a_whole_asks_its_v1beta1_gang_for_disruption_mode_all() -> None:
    """MultiWorkerMirrored restarts every worker together: one disrupted pod is the whole gang's disruption."""
    mirrored = {"replicaSpecs": {"Worker": _replica(3)}, "runPolicy": {"gang": True}}
    (workload, group), _ = _native_gang(WorkloadApi.V1BETA1, mirrored)
    assert workload["spec"]["podGroupTemplates"][0]["disruptionMode"] == {"all": {}}
    assert group["spec"]["disruptionMode"] == {"all": {}}
    (workload, group), _ = _native_gang(WorkloadApi.V1ALPHA2, mirrored)  # 1.36 knows no disruptionMode
    assert "disruptionMode" not in group["spec"] and "disruptionMode" not in workload["spec"]["podGroupTemplates"][0]


def test_kubernetes_1_36_gangs_are_v1alpha2_whose_pod_group_names_the_template_by_podgrouptemplateref() -> None:
    (workload, group), pods = _native_gang(WorkloadApi.V1ALPHA2)
    gang = {"schedulingPolicy": {"gang": {"minCount": 7}}, "priorityClassName": "high"}
    assert workload["apiVersion"] == group["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert workload["spec"] == {"controllerRef": _OWNER, "podGroupTemplates": [{"name": "gang", **gang}]}
    reference = {"workload": {"workloadName": "demo", "podGroupTemplateName": "gang"}}
    assert group["spec"] == {"podGroupTemplateRef": reference, **gang}
    assert pods["demo-worker-0"]["schedulingGroup"] == {"podGroupName": "demo"}


def test_kubernetes_1_35_gangs_are_one_v1alpha1_workload_whose_pod_group_each_pod_names() -> None:
    (workload,), pods = _native_gang(WorkloadApi.V1ALPHA1)
    assert workload["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    group = {"name": "gang", "policy": {"gang": {"minCount": 7}}}
    assert workload["spec"] == {"controllerRef": _OWNER, "podGroups": [group]}
    joined = {
        name for name, pod_spec in pods.items() if pod_spec.get("workloadRef") == {"name": "demo", "podGroup": "gang"}
    }
    assert joined == set(pods) - {"demo-evaluator-0"}
    assert all("schedulingGroup" not in pod_spec for pod_spec in pods.values())
    racked = _job({**_GANG_SPEC, "runPolicy": {"schedulingPolicy": {"topologyKey": "example.com/rack"}}})
    unmet = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=WorkloadApi.V1ALPHA1).gang.unmet_need
    assert "topologyKey needs Kubernetes 1.36 or later" in str(unmet(racked))


def test_where_no_workload_api_is_served_a_gang_job_runs_as_no_gang_and_says_why() -> None:
    gang, pods = _native_gang(None)
    assert gang == []
    assert all("schedulingGroup" not in pod_spec and "workloadRef" not in pod_spec for pod_spec in pods.values())
    unserved = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=None).gang
    assert "serves no Workload API disttrain builds" in str(unserved.unserved(_job(_GANG_SPEC)))
    assert unserved.unserved(_job({"replicaSpecs": {"Worker": _replica(2)}})) is None  # no gang asked for


def _job_with_worker_resources(resources: dict[str, Any]) -> DistTrainJob:
    return _job({"replicaSpecs": {"Worker": _replica(2, resources=resources)}})


@pytest.mark.parametrize(
    ("quantities", "total"),
    [
        ({"memory": "1Pi"}, {"memory": str(2 * 2**50)}),
        ({"memory": "2E"}, {"memory": str(4 * 10**18)}),
        ({"cpu": "100n"}, {"cpu": "1m"}),  # finer than a thousandth: rounded up, as Kubernetes rounds CPU
        ({"cpu": "500u"}, {"cpu": "1m"}),
        ({"cpu": "1e3", "memory": "1.5Gi"}, {"cpu": "2000", "memory": str(3 * 2**30)}),
        ({"cpu": ".5", "nvidia.com/gpu": 1}, {"cpu": "1", "nvidia.com/gpu": "2"}),
    ],
)
def test_a_gang_sums_every_quantity_kubernetes_accepts(quantities: dict[str, Any], total: dict[str, str]) -> None:
    job = _job_with_worker_resources({"limits": quantities})
    assert min_resources(job) == total


@pytest.mark.parametrize("quantity", ["lots", "1Qi", "1e99999", "--1", "", "1 Gi"])
def test_a_quantity_kubernetes_refuses_fails_the_job_by_name(quantity: str) -> None:
    with pytest.raises(InvalidManifestError, match=r"containers\[0\]\.resources\.limits\.memory"):
        _job_with_worker_resources({"limits": {"memory": quantity}})


def _gpu_pod(replica: dict[str, Any], **spec: Any) -> Manifest:
    return pod(_job({"replicaSpecs": {"Worker": replica}, **spec}), ReplicaType.WORKER, 0, BuildSettings())


def _shm(manifest: Manifest) -> tuple[list[Manifest], list[Manifest]]:
    container = trainer_container(manifest["spec"]["containers"])
    mounts = [mount for mount in container.get("volumeMounts", []) if mount["mountPath"] == "/dev/shm"]
    names = {mount["name"] for mount in mounts}
    return mounts, [volume for volume in manifest["spec"].get("volumes", []) if volume["name"] in names]


def test_a_pod_that_asks_for_gpus_gets_a_memory_backed_dev_shm_and_no_other_pod_does() -> None:
    """A container runtime's /dev/shm is 64M, where NCCL's buffers do not fit."""
    gpu = _gpu_pod(_replica(1, resources={"limits": {"nvidia.com/gpu": 2}}))
    mounts, volumes = _shm(gpu)
    assert mounts == [{"name": "disttrain-shm", "mountPath": "/dev/shm"}]
    assert volumes == [{"name": "disttrain-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
    mig = _gpu_pod(_replica(1, resources={"limits": {"nvidia.com/mig-1g.10gb": 1}}))  # one MIG slice
    assert _shm(mig)[1][0]["emptyDir"]["sizeLimit"] == "1Gi"
    assert _shm(_gpu_pod(_replica(1)))[0] == []  # no GPU: nothing
    sized = _gpu_pod({**_replica(1, resources={"limits": {"nvidia.com/gpu": 1}}), "sharedMemory": "8Gi"})
    assert _shm(sized)[1][0]["emptyDir"]["sizeLimit"] == "8Gi"
    small = _gpu_pod(_replica(1, resources={"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}}))
    assert _shm(small)[1][0]["emptyDir"]["sizeLimit"] == str(512 * 1024**2)  # half the memory limit at most


def test_a_template_that_mounts_its_own_dev_shm_keeps_it() -> None:
    own = {"volumeMounts": [{"name": "mine", "mountPath": "/dev/shm"}], "resources": {"limits": {"nvidia.com/gpu": 1}}}
    replica = _replica(1, **own)
    replica["template"]["spec"]["volumes"] = [{"name": "mine", "emptyDir": {"medium": "Memory"}}]
    mounts, volumes = _shm(_gpu_pod(replica))
    assert mounts == [{"name": "mine", "mountPath": "/dev/shm"}] and volumes == [
        {"name": "mine", "emptyDir": {"medium": "Memory"}}
    ]


def test_nccl_settings_reach_the_gpu_pods_and_a_templates_own_variables_stand() -> None:
    env = [{"name": "NCCL_DEBUG", "value": "TRACE"}, {"name": "NCCL_ALGO", "value": "Ring"}]
    replica = _replica(1, env=env, resources={"limits": {"nvidia.com/gpu": 1}})
    nccl = {"debug": "INFO", "socketIfname": "^lo,docker", "ibDisable": True}
    built = trainer_container(_gpu_pod(replica, nccl=nccl)["spec"]["containers"])
    values = {entry["name"]: entry.get("value") for entry in built["env"]}
    assert (values["NCCL_DEBUG"], values["NCCL_ALGO"]) == ("TRACE", "Ring")  # the template's, passed through
    assert (values["NCCL_SOCKET_IFNAME"], values["NCCL_IB_DISABLE"]) == ("^lo,docker", "1")
    assert "NCCL_P2P_DISABLE" not in values
    cpu = trainer_container(_gpu_pod(_replica(1), nccl=nccl)["spec"]["containers"])
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
        _job({"replicaSpecs": {"Worker": _replica(1)}, **spec})


def test_more_shared_memory_than_the_memory_limit_is_refused_saying_so() -> None:
    """A memory-backed /dev/shm counts against the container's memory limit: the kubelet would evict the pod."""
    replica = {**_replica(1, resources={"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}}), "sharedMemory": "8Gi"}
    with pytest.raises(ValueError, match="sharedMemory 8Gi is more than the trainer container's memory limit 4Gi"):
        _unchecked_job({"replicaSpecs": {"Worker": replica}})
    with pytest.raises(InvalidManifestError, match="sharedMemory"):
        _job({"replicaSpecs": {"Worker": {**replica, "sharedMemory": "lots"}}})
