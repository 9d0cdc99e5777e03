"""What a long-lived view holds of a job: the job as it is while its templates are small, else without them."""

from __future__ import annotations

from typing import Any

from disttrain_core.api.spec import ReplicaType
from disttrain_core.held import HELD_JOB_BYTES, PLACEHOLDER_TEMPLATE, held_job, weight, without_templates
from support.job_builder import JobBuilder


def _padded(entries: int) -> dict[str, Any]:
    env = [{"name": f"PAD_{n:05d}", "value": "x" * 60} for n in range(entries)]
    return {"spec": {"containers": [{"name": "tensorflow", "image": "i", "env": env}]}}


def test_a_job_with_small_templates_is_held_as_it_is() -> None:
    job = JobBuilder().counts({"Chief": 1, "Worker": 2}).job()
    assert held_job(job) is job


def test_a_job_with_large_templates_is_held_without_them_and_reads_the_same_elsewhere() -> None:
    job = JobBuilder().counts({"Chief": 1, "Worker": 3}).status().job()
    replicas = {
        replica_type: replica.model_copy(update={"template": _padded(2_000)})
        for replica_type, replica in job.spec.replica_specs.items()
    }
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"replica_specs": replicas})})
    assert weight({t: r.template for t, r in job.spec.replica_specs.items()}) > HELD_JOB_BYTES
    held = held_job(job)
    assert {replica.template == PLACEHOLDER_TEMPLATE for replica in held.spec.replica_specs.values()} == {True}
    assert held.spec.replicas(ReplicaType.WORKER) == 3 and held.status == job.status
    assert held.metadata == job.metadata and held.spec.strategy == job.spec.strategy
    assert weight(held.model_dump(mode="json")) < HELD_JOB_BYTES


def test_a_raw_spec_of_either_kind_loses_its_templates_and_keeps_the_rest() -> None:
    spec = {"replicaSpecs": {"Worker": {"replicas": 2, "template": _padded(10)}}, "strategy": "Mirrored"}
    assert without_templates(spec) == {
        "replicaSpecs": {"Worker": {"replicas": 2, "template": PLACEHOLDER_TEMPLATE}},
        "strategy": "Mirrored",
    }
    tfjob = {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": _padded(10)}, "PS": "not a mapping"}}
    assert without_templates(tfjob)["tfReplicaSpecs"] == {
        "Worker": {"replicas": 2, "template": PLACEHOLDER_TEMPLATE},
        "PS": "not a mapping",
    }
    assert without_templates({"replicaSpecs": None}) == {"replicaSpecs": None}
