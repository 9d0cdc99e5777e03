"""Gangs as each scheduler reads them: the pod groups, Workloads and minimums the builders make, and what they sum."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler, WorkloadApi, min_resources
from disttrain_core.builders.objects import desired_objects, pod
from disttrain_core.served import job_manifest
from disttrain_core.types import Manifest
from support.builder_inputs import DEFAULT_SETTINGS, built_job, replica_spec, unchecked_job


def test_pod_group_for_each_gang_scheduler() -> None:
    spec = {
        "replicaSpecs": {
            "Worker": replica_spec(3, resources={"limits": {"nvidia.com/gpu": 2}, "requests": {"cpu": "500m"}})
        },
        "runPolicy": {"schedulingPolicy": {"queue": "research", "priorityClass": "high"}},
    }
    job = built_job(spec)
    plugins = [item for item in desired_objects(job, DEFAULT_SETTINGS) if item["kind"] == "PodGroup"]
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
        for item in desired_objects(built_job({"replicaSpecs": {"Worker": replica_spec(1)}}), DEFAULT_SETTINGS)
        if item["kind"] == "PodGroup"
    ]


def _gang_objects(job: DistTrainJob, settings: BuildSettings) -> list[Manifest]:
    return [item for item in desired_objects(job, settings) if item["kind"] == "PodGroup"]


def test_the_operator_can_make_every_job_a_gang_which_a_job_can_refuse() -> None:
    by_default = BuildSettings(gang_by_default=True)
    plain = built_job({"replicaSpecs": {"Chief": replica_spec(1), "Worker": replica_spec(3)}})
    (group,) = _gang_objects(plain, by_default)
    assert group["spec"]["minMember"] == 4  # every pod, as training-operator's gangs ask
    assert (
        pod(plain, ReplicaType.WORKER, 2, by_default)["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "demo"
    )
    assert not _gang_objects(plain, DEFAULT_SETTINGS)

    refusing = built_job({"replicaSpecs": {"Worker": replica_spec(2)}, "runPolicy": {"gang": False}})
    assert not _gang_objects(refusing, by_default)
    assert "schedulerName" not in pod(refusing, ReplicaType.WORKER, 0, by_default)["spec"]
    asking = built_job({"replicaSpecs": {"Worker": replica_spec(2)}, "runPolicy": {"gang": True}})
    assert [group["spec"]["minMember"] for group in _gang_objects(asking, DEFAULT_SETTINGS)] == [2]


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
    job = unchecked_job(
        {"replicaSpecs": {"Worker": replica_spec(2)}, "runPolicy": {"schedulingPolicy": {"minAvailable": 5}}}
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
    spec = {"replicaSpecs": {"Worker": replica_spec(2), "Evaluator": replica_spec(1)}}
    within = built_job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 2}}})
    with pytest.raises(InvalidManifestError, match="minAvailable is more than the job's Chief, Worker and PS pods"):
        built_job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 3}}})
    counting = unchecked_job({**spec, "runPolicy": {"schedulingPolicy": {"minAvailable": 3}}})
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
    "replicaSpecs": {
        "Chief": replica_spec(1),
        "Worker": replica_spec(4),
        "PS": replica_spec(2),
        "Evaluator": replica_spec(1),
    },
    "runPolicy": {"schedulingPolicy": {"priorityClass": "high"}},
}


_OWNER = {"apiGroup": "disttrain.io", "kind": "DistTrainJob", "name": "demo"}


def _native_gang(api: WorkloadApi | None, spec: dict[str, Any] = _GANG_SPEC) -> tuple[list[Manifest], dict[str, Any]]:
    """The gang objects and every pod's spec, by name, under Kubernetes' own gangs of `api`."""
    built = desired_objects(
        built_job(spec, uid="u1"), BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=api)
    )
    gang = [item for item in built if item["kind"] in ("Workload", "PodGroup")]
    return gang, {item["metadata"]["name"]: item["spec"] for item in built if item["kind"] == "Pod"}


def test_kubernetes_gangs_are_a_workload_and_its_pod_group_which_every_pod_but_the_evaluator_joins() -> None:
    """Kubernetes 1.37's v1beta1 (the default): the PodGroup names its Workload's template in workloadRef, and a
    ParameterServer job, whose PS failure restarts the Chief and workers but not itself, asks for no
    disruptionMode."""
    built = desired_objects(built_job(_GANG_SPEC, uid="u1"), BuildSettings(gang_scheduler=GangScheduler.KUBERNETES))
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
    mirrored = {"replicaSpecs": {"Worker": replica_spec(3)}, "runPolicy": {"gang": True}}
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
    racked = built_job({**_GANG_SPEC, "runPolicy": {"schedulingPolicy": {"topologyKey": "example.com/rack"}}})
    unmet = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=WorkloadApi.V1ALPHA1).gang.unmet_need
    assert "topologyKey needs Kubernetes 1.36 or later" in str(unmet(racked))


def test_where_no_workload_api_is_served_a_gang_job_runs_as_no_gang_and_says_why() -> None:
    gang, pods = _native_gang(None)
    assert gang == []
    assert all("schedulingGroup" not in pod_spec and "workloadRef" not in pod_spec for pod_spec in pods.values())
    unserved = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=None).gang
    assert "serves no Workload API disttrain builds" in str(unserved.unserved(built_job(_GANG_SPEC)))
    assert unserved.unserved(built_job({"replicaSpecs": {"Worker": replica_spec(2)}})) is None  # no gang asked for


def _job_with_worker_resources(resources: dict[str, Any]) -> DistTrainJob:
    return built_job({"replicaSpecs": {"Worker": replica_spec(2, resources=resources)}})


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
