"""The tests' job builder changes an example a step at a time and leaves the rest as the example wrote it."""

from __future__ import annotations

from disttrain_core.api.spec import ReplicaType
from support.job_builder import JobBuilder


def test_an_example_changed_a_step_at_a_time_keeps_what_it_did_not_change() -> None:
    example = JobBuilder.from_example("local-multi-worker-digits.yaml")
    assert example.job().spec.checkpoint is not None
    changed = example.metadata(name="narrow").replica("Worker", replicas=3).container(args=["--epochs", "1"])
    job = changed.without("checkpoint").run_policy(suspend=True).job()
    worker = job.spec.replica_specs[ReplicaType.WORKER]
    container = worker.template["spec"]["containers"][0]
    assert (job.metadata.name, worker.replicas, container["args"]) == ("narrow", 3, ["--epochs", "1"])
    assert (container["image"], container["resources"]["requests"]["cpu"]) == ("disttrain/trainer:0.1.0", "500m")
    assert job.spec.checkpoint is None and job.spec.run_policy.suspend
