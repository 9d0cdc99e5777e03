"""The planner: what to create and clean up, when to wake, when to give up (its restarts: tests/unit/core/restarts)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import JobPhase, ReplicaStatus
from disttrain_core.api.tenant_input import ATTEMPT
from disttrain_core.builders import objects
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler
from disttrain_core.builders.objects import object_key
from disttrain_core.builders.tfconfig import TFConfigs, tf_config
from disttrain_core.gang_status import with_gang
from disttrain_core.held import weight
from disttrain_core.observed import PodPhase, PodView, Unschedulable, unschedulable
from disttrain_core.planner import CREATE_BATCH, PEERS_END_GRACE, PLAN_TEMPLATE_BYTES, Plan, plan, pod_batch
from disttrain_core.status_from_pods import aggregated
from disttrain_core.types import Manifest, ObjectRef
from support.job_builder import JobBuilder
from support.planning import NOW, SETTINGS, job_of, planned, pod_of
from support.repository import ROOT, load_one

TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}
MWMS = parse_job(load_one(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml"))
CHILDREN = [
    ObjectRef("Service", "mnist-mwms"),
    ObjectRef("NetworkPolicy", "mnist-mwms"),
    ObjectRef("PersistentVolumeClaim", "mnist-mwms-checkpoint"),
]

JOB_CHILDREN = [ObjectRef("Service", "job"), ObjectRef("NetworkPolicy", "job")]


def _mwms_worker(index: int, phase: PodPhase = PodPhase.RUNNING, deleting: bool = False) -> PodView:
    name = f"mnist-mwms-worker-{index}"
    return PodView(name, ReplicaType.WORKER, index, phase, uid=f"uid-{name}", deleting=deleting)


def test_everything_for_a_new_job() -> None:
    names = [object_key(item).name for item in plan(MWMS, [], [], SETTINGS, now=NOW).create]
    kinds = [item["kind"] for item in plan(MWMS, [], [], SETTINGS, now=NOW).create]
    assert names == ["mnist-mwms", "mnist-mwms", "mnist-mwms-checkpoint", *(f"mnist-mwms-worker-{i}" for i in range(4))]
    assert kinds[:3] == ["Service", "NetworkPolicy", "PersistentVolumeClaim"]  # closed before any pod starts


def test_no_pod_starts_while_one_of_an_earlier_attempt_still_stops() -> None:
    """New pods would reach the old ones under the same names; one that ended runs nothing."""
    pods = [_mwms_worker(0), _mwms_worker(2, deleting=True)]
    assert [object_key(item).name for item in plan(MWMS, pods, CHILDREN, SETTINGS, now=NOW).create] == []
    pods = [_mwms_worker(0), replace(_mwms_worker(2, PodPhase.FAILED), deleting=True)]
    names = [object_key(item).name for item in plan(MWMS, pods, CHILDREN, SETTINGS, now=NOW).create]
    assert names == ["mnist-mwms-worker-1", "mnist-mwms-worker-3"]


def test_a_pod_a_restart_stopped_but_that_is_still_there_is_deleted_again_once_its_log_is_kept() -> None:
    """Its deletion was refused (it changed since it was seen) or failed: the restart is decided, and a plan
    from the newer view finishes it, without counting the pod's own end as one more restart."""
    job = job_of({"Worker": 2})
    ended = pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=137)
    handled = {"uid-job-worker-0-0", ended.uid}
    gone = replace(pod_of(ReplicaType.WORKER, 0), deleting=True)
    waiting = planned(job, [gone, ended], handled=handled, unkept={ended.uid})
    assert (waiting.restart, waiting.delete) == (None, [])
    finishing = planned(job, [gone, ended], handled=handled)
    assert (finishing.restart, finishing.delete) == (None, ["job-worker-1"])


def test_cleanup_after_success_follows_clean_pod_policy() -> None:
    pods = [
        pod_of(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED),
        pod_of(ReplicaType.PS, 0),
        pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=143),
    ]
    counts = {"Chief": 1, "Worker": 1, "PS": 1}
    assert planned(job_of(counts), pods).delete == ["job-ps-0"]
    assert planned(job_of(counts, cleanPodPolicy="All"), pods).delete == ["job-chief-0", "job-ps-0", "job-worker-0"]
    assert planned(job_of(counts, cleanPodPolicy="None"), pods).delete == []


def test_a_multi_worker_job_that_succeeded_gives_its_other_workers_a_grace_to_end_on_their_own() -> None:
    """Worker 0 succeeded: its peers ran the same steps and end with it within moments; stopped at once, their
    last lines and exit codes would be lost. They have PEERS_END_GRACE, then the cleanup stops what still runs."""
    pods = [_mwms_worker(0, PodPhase.SUCCEEDED), *(_mwms_worker(index) for index in range(1, 4))]
    status = aggregated(MWMS, pods, created=True, now=NOW).status
    done = MWMS.model_copy(update={"status": status})
    assert status.phase is JobPhase.SUCCEEDED and status.completion_time == NOW
    held = plan(done, pods, CHILDREN, SETTINGS, now=NOW + timedelta(seconds=5))
    assert held.delete == [] and held.wake_at == NOW + PEERS_END_GRACE
    ended = [pods[0], _mwms_worker(1, PodPhase.SUCCEEDED), *pods[2:]]
    assert plan(done, ended, CHILDREN, SETTINGS, now=NOW + timedelta(seconds=6)).wake_at == NOW + PEERS_END_GRACE
    late = plan(done, ended, CHILDREN, SETTINGS, now=NOW + PEERS_END_GRACE)
    assert late.delete == ["mnist-mwms-worker-2", "mnist-mwms-worker-3"] and late.wake_at is None
    failed = [_mwms_worker(0, PodPhase.FAILED), *pods[1:]]  # a failure stops them at once
    lost = JobBuilder.from_example("multi-worker-mirrored-gpu.yaml").replica("Worker", restartPolicy="Never").job()
    lost = lost.model_copy(update={"status": aggregated(lost, failed, created=True, now=NOW).status})
    assert lost.status.phase is JobPhase.FAILED
    assert plan(lost, failed, CHILDREN, SETTINGS, now=NOW + timedelta(seconds=1)).delete == [
        f"mnist-mwms-worker-{index}" for index in range(1, 4)
    ]


def test_succeeded_indexes_are_never_created_again() -> None:
    job = job_of({"Chief": 1, "Worker": 2})
    done = {ReplicaType.WORKER: ReplicaStatus(succeeded_indexes=[1])}
    job = job.model_copy(update={"status": job.status.model_copy(update={"replica_statuses": done})})
    result = plan(job, [pod_of(ReplicaType.CHIEF, 0)], JOB_CHILDREN, SETTINGS, now=NOW)
    assert [object_key(item).name for item in result.create] == ["job-worker-0"]


def test_deadline_wake_up_and_ttl() -> None:
    job = job_of({"Worker": 1}, activeDeadlineSeconds=60, ttlSecondsAfterFinished=30)
    running = planned(job, [pod_of(ReplicaType.WORKER, 0)])
    assert running.wake_at == NOW + timedelta(seconds=60)
    finished = aggregated(job, [pod_of(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED)], created=True, now=NOW).status
    done = job.model_copy(update={"status": finished})
    assert plan(done, [], [], SETTINGS, now=NOW + timedelta(seconds=10)).wake_at == NOW + timedelta(seconds=30)
    assert plan(done, [], [], SETTINGS, now=NOW + timedelta(seconds=30)).delete_job


def test_a_suspended_job_has_no_pods_but_keeps_its_volume() -> None:
    job = job_of({"Worker": 2}, suspend=True)
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"checkpoint": MWMS.spec.checkpoint})})
    result = planned(job, [pod_of(ReplicaType.WORKER, 0), pod_of(ReplicaType.WORKER, 1, deleting=True)])
    assert result.delete == ["job-worker-0"]
    assert [item["kind"] for item in result.create] == ["Service", "NetworkPolicy", "PersistentVolumeClaim"]


def test_pods_stuck_terminating_are_removed_by_force_after_a_bounded_wait() -> None:
    job = job_of({"Worker": 2})
    gone = pod_of(ReplicaType.WORKER, 1, deleting=True, deletion_time=NOW - timedelta(seconds=31))
    going = pod_of(ReplicaType.WORKER, 0, deleting=True, deletion_time=NOW - timedelta(seconds=10))
    result = planned(job, [going, gone])
    assert result.force_delete == ["job-worker-1"]
    assert result.wake_at == NOW + timedelta(seconds=20)


def test_a_pod_held_only_by_a_finalizer_is_not_stuck() -> None:
    """Its containers ended, or its node let it go: a finalizer (another's, or an earlier version's log
    keeper's) holds it, and force would only post a false PodStuckTerminating."""
    job = job_of({"Worker": 2})
    long_ago = NOW - timedelta(minutes=10)
    ended = pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, deleting=True, deletion_time=long_ago)
    released = pod_of(ReplicaType.WORKER, 1, deleting=True, deletion_time=long_ago, released=True)
    assert planned(job, [ended, released]).force_delete == []
    stuck = pod_of(ReplicaType.WORKER, 1, deleting=True, deletion_time=long_ago)
    assert planned(job, [ended, stuck]).force_delete == ["job-worker-1"]


def test_a_pod_deleted_by_someone_else_is_a_retryable_loss_and_ours_are_not() -> None:
    job = job_of({"Worker": 2})
    deleted = pod_of(ReplicaType.WORKER, 1, deleting=True)
    result = planned(job, [pod_of(ReplicaType.WORKER, 0), deleted])
    assert result.restart is not None
    assert result.restart.message == "job-worker-1 was deleted while running: the whole job restarts"
    assert result.delete == ["job-worker-0"]
    assert planned(job, [pod_of(ReplicaType.WORKER, 0), deleted], handled={deleted.uid}).restart is None
    never = job_of({"Worker": 2}, policy="Never")
    assert planned(never, [pod_of(ReplicaType.WORKER, 0), deleted]).restart is None  # recreated, as TFJob does


def test_a_gang_that_finds_no_place_fails_the_job_once_its_schedule_timeout_passes() -> None:
    job = job_of({"Worker": 3}, schedulingPolicy={"scheduleTimeoutSeconds": 120})
    since = NOW - timedelta(seconds=100)
    waiting = Unschedulable(since, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    pods = [pod_of(ReplicaType.WORKER, i, PodPhase.PENDING, unschedulable=waiting) for i in range(3)]
    assert planned(job, pods).wake_at == since + timedelta(seconds=120)  # looked at again when it runs out
    verdict = planned(job, pods, now=since + timedelta(seconds=120)).fail
    assert verdict is not None and verdict.reason == "ScheduleTimeout"
    assert verdict.message == (
        "3 of its pods found no place within scheduleTimeoutSeconds 120 "
        "(job-worker-0: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.)"
    )
    untimed = job_of({"Worker": 3}, schedulingPolicy={})
    assert planned(untimed, pods, now=NOW + timedelta(days=1)).fail is None  # no timeout: it waits
    placed = [pod_of(ReplicaType.WORKER, i, PodPhase.PENDING) for i in range(3)]
    assert planned(job, placed, now=NOW + timedelta(days=1)).fail is None


def test_a_topology_key_fails_the_job_before_any_pod_unless_the_gangs_are_kubernetes_own() -> None:
    job = job_of({"Worker": 3}, schedulingPolicy={"topologyKey": "topology.kubernetes.io/zone"})
    refused = plan(job, [], [], SETTINGS, now=NOW)
    assert refused.create == [] and refused.fail is not None and refused.fail.reason == "InvalidSpec"
    assert refused.fail.message == (
        "the operator cannot act on this spec: schedulingPolicy.topologyKey needs the operator's gang scheduler "
        "to be kubernetes (DISTTRAIN_GANG_SCHEDULER); this operator's is scheduler-plugins"
    )
    native = plan(job, [], [], BuildSettings(gang_scheduler=GangScheduler.KUBERNETES), now=NOW)
    assert native.fail is None and {object_key(item).kind for item in native.create} >= {"PodGroup", "Pod"}


def test_a_gang_larger_than_its_job_holds_the_pods_and_says_why_until_min_available_is_lowered() -> None:
    """As training-operator leaves such a TFJob Created and never placed (a DistTrainJob's CRD refuses it): the
    Service is made, no pod and no gang; Created says the pods wait and GangUnavailable why; lowered, it runs."""
    native = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES)
    too_large = JobBuilder().counts({"Worker": 1}).run_policy(schedulingPolicy={"minAvailable": 10}).model()
    held = plan(too_large, [], [], native, now=NOW)
    assert held.fail is None and {object_key(item).kind for item in held.create} == {"Service", "NetworkPolicy"}
    status = with_gang(too_large, aggregated(too_large, [], created=True, now=NOW).status, native.gang, NOW)
    conditions = {condition.type.value: condition for condition in status.conditions}
    assert (conditions["Created"].status, conditions["Created"].reason) == ("True", "PodsHeld")
    assert (conditions["GangUnavailable"].status, conditions["GangUnavailable"].reason) == ("True", "GangTooLarge")
    assert "minAvailable 10 is more than the 1 pods" in conditions["GangUnavailable"].message
    assert status.phase is JobPhase.PENDING

    lowered = too_large.model_copy(update={"status": status})
    lowered = lowered.model_copy(
        update={
            "spec": JobBuilder().counts({"Worker": 1}).run_policy(schedulingPolicy={"minAvailable": 1}).model().spec
        }
    )
    running = plan(lowered, [], JOB_CHILDREN, native, now=NOW)
    assert {object_key(item).kind for item in running.create} == {"Workload", "PodGroup", "Pod"}
    after = with_gang(lowered, aggregated(lowered, [], created=True, now=NOW).status, native.gang, NOW)
    conditions = {condition.type.value: condition for condition in after.conditions}
    assert (conditions["Created"].reason, conditions["GangUnavailable"].status) == ("ChildrenCreated", "False")


def test_a_gang_job_where_no_workload_api_is_served_runs_and_says_it_is_no_gang() -> None:
    unserved = BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, workload_api=None)
    job = job_of({"Worker": 2}, gang=True)
    created = plan(job, [], [], unserved, now=NOW)
    assert {object_key(item).kind for item in created.create} == {"Service", "NetworkPolicy", "Pod"}
    status = with_gang(job, aggregated(job, [], created=True, now=NOW).status, unserved.gang, NOW)
    (said,) = [condition for condition in status.conditions if condition.type.value == "GangUnavailable"]
    assert (said.status, said.reason) == ("True", "WorkloadAPINotServed")
    plain = job_of({"Worker": 2})
    assert with_gang(plain, plain.status, unserved.gang, NOW) == plain.status  # no gang asked: nothing said


def test_only_a_pod_the_scheduler_found_no_place_for_is_unschedulable() -> None:
    condition = {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    pending = {"spec": {}, "status": {"conditions": [{**condition, "reason": "Unschedulable", "message": "full"}]}}
    assert unschedulable(pending) == Unschedulable(NOW, "full")
    assert unschedulable({"spec": {}, "status": {"conditions": [{**condition, "reason": "SchedulingGated"}]}}) is None
    assert unschedulable({**pending, "spec": {"nodeName": "n1"}}) is None  # bound since: a stale condition


def test_a_pod_that_ended_is_deleted_only_once_its_log_is_kept() -> None:
    """No finalizer holds it, so its log goes with it: a restart, a cleanup, a suspension and the job's TTL
    wait for the kept-log keeper, which wakes the job once the log is settled."""
    failed = pod_of(ReplicaType.WORKER, 1, PodPhase.FAILED, exit_code=130)
    pods = [pod_of(ReplicaType.WORKER, 0), failed]
    waiting = planned(job_of({"Worker": 2}), pods, unkept={failed.uid})
    assert (waiting.restart, waiting.delete) == (None, [])
    assert planned(job_of({"Worker": 2}), pods).delete == ["job-worker-0", "job-worker-1"]
    others = planned(job_of({"Worker": 2}), pods, unkept={"uid-of-another-pod"})
    assert others.restart is not None  # only the pods the restart deletes are waited for

    ended = [pod_of(ReplicaType.CHIEF, 0, PodPhase.SUCCEEDED), pod_of(ReplicaType.PS, 0), pod_of(ReplicaType.WORKER, 0)]
    cleanup = planned(job_of({"Chief": 1, "Worker": 1, "PS": 1}, cleanPodPolicy="All"), ended, unkept={ended[0].uid})
    assert cleanup.delete == ["job-ps-0", "job-worker-0"]  # those still running are followed as they stop

    suspended = planned(job_of({"Worker": 2}, suspend=True), pods, unkept={failed.uid})
    assert suspended.delete == ["job-worker-0"]

    job = job_of({"Worker": 1}, ttlSecondsAfterFinished=0)
    succeeded = pod_of(ReplicaType.WORKER, 0, PodPhase.SUCCEEDED)
    done = job.model_copy(update={"status": aggregated(job, [succeeded], created=True, now=NOW).status})
    assert not plan(done, [succeeded], [], SETTINGS, now=NOW, unkept={succeeded.uid}).delete_job
    assert plan(done, [succeeded], [], SETTINGS, now=NOW).delete_job


def test_a_new_pod_is_one_attempt_past_its_index_s_latest() -> None:
    job = job_of({"Worker": 2})
    first = planned(job, [], children=JOB_CHILDREN)
    assert [item["metadata"]["annotations"][ATTEMPT] for item in first.create] == ["1", "1"]
    seen = [pod_of(ReplicaType.WORKER, 0, attempt=1), pod_of(ReplicaType.WORKER, 1, attempt=3)]
    status = aggregated(job, seen, created=True, now=NOW).status
    assert status.replica_statuses[ReplicaType.WORKER].attempts == [1, 3]
    replaced = plan(job.model_copy(update={"status": status}), seen[:1], JOB_CHILDREN, SETTINGS, now=NOW)
    assert [(item["metadata"]["name"], item["metadata"]["annotations"][ATTEMPT]) for item in replaced.create] == [
        ("job-worker-1", "4")
    ]
    later = aggregated(job.model_copy(update={"status": status}), [], created=True, now=NOW).status
    assert later.replica_statuses[ReplicaType.WORKER].attempts == [1, 3]  # remembered once the pods are gone


def test_a_job_being_deleted_makes_nothing_again() -> None:
    """A finalizer of another's may hold it while its namespace goes: its pods go, and none is made anew."""
    job = job_of({"Worker": 2})
    going = job.model_copy(update={"metadata": job.metadata.model_copy(update={"deletion_timestamp": NOW})})
    failed = [pod_of(ReplicaType.WORKER, 0, PodPhase.FAILED, exit_code=137)]
    assert planned(going, failed) == Plan() and planned(going, []) == Plan()
    assert planned(job, []).create


def _counting_pod_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the pods the builders build from now on."""
    built: list[str] = []
    real = objects.pod

    def counted(job: DistTrainJob, kind: ReplicaType, index: int, *args: Any) -> Manifest:
        manifest = real(job, kind, index, *args)
        built.append(manifest["metadata"]["name"])
        return manifest

    monkeypatch.setattr(objects, "pod", counted)
    return built


def test_a_plan_builds_only_the_pods_it_creates_at_most_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job of more pods than CREATE_BATCH gets them over several plans, each waking the next at once;
    pods that exist, or were just created, are not built again."""
    built = _counting_pod_builds(monkeypatch)
    job = job_of({"Chief": 1, "PS": 100, "Worker": 100})
    made: list[str] = []
    for batch in (CREATE_BATCH, CREATE_BATCH, 1):
        built.clear()
        next_plan = plan(job, [], [], SETTINGS, now=NOW, awaited=made)
        created = [item["metadata"]["name"] for item in next_plan.create if item["kind"] == "Pod"]
        assert len(created) == batch and built == created and not set(created) & set(made)
        assert next_plan.more is (batch == CREATE_BATCH)
        assert (next_plan.wake_at == NOW) is next_plan.more
        made += created
    assert len(set(made)) == 201


def test_a_plan_of_pods_with_large_templates_builds_fewer_that_weigh_a_bounded_amount_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each pod copies its template until it is created: a plan builds as many as PLAN_TEMPLATE_BYTES of them
    weigh, and one at least, whatever the template's size."""
    built = _counting_pod_builds(monkeypatch)
    for env_entries, batches in ((5_000, range(2, 20)), (40_000, [1]), (10, [CREATE_BATCH])):
        env = [{"name": f"PAD_{n:05d}", "value": "x" * 60} for n in range(env_entries)]
        job = job_of({"Worker": 200})
        worker = job.spec.replica_specs[ReplicaType.WORKER]
        template = {"spec": {"containers": [{"name": "tensorflow", "image": "i", "env": env}]}}
        replicas = {ReplicaType.WORKER: worker.model_copy(update={"template": template})}
        job = job.model_copy(update={"spec": job.spec.model_copy(update={"replica_specs": replicas})})
        assert pod_batch(job) == min(CREATE_BATCH, max(1, PLAN_TEMPLATE_BYTES // weight(template)))
        built.clear()
        next_plan = plan(job, [], [], SETTINGS, now=NOW)
        assert len(built) == pod_batch(job) and pod_batch(job) in batches and next_plan.more


def test_a_suspended_job_builds_no_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting_pod_builds(monkeypatch)
    suspended = plan(job_of({"PS": 300, "Worker": 300}, suspend=True), [], [], SETTINGS, now=NOW)
    assert built == [] and [item["kind"] for item in suspended.create] == ["Service", "NetworkPolicy"]


def test_every_pod_s_tf_config_is_its_own_cluster_and_task_written_once() -> None:
    job = job_of({"Chief": 1, "PS": 2, "Worker": 3, "Evaluator": 1})
    configs = TFConfigs(job, SETTINGS)
    for kind in ReplicaType:
        for index in range(job.spec.replicas(kind)):
            expected = json.dumps(tf_config(job, kind, index, SETTINGS), separators=(",", ":"))
            assert configs.json(kind, index) == expected
    assert TFConfigs(job_of({"Worker": 1}), SETTINGS).json(ReplicaType.WORKER, 0) is None
