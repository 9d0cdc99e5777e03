"""TF_CONFIG as the builders write it: which tasks each one names, and where they are found."""

from __future__ import annotations

from disttrain_core.api.spec import ReplicaType
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import pod
from support.builder_inputs import DEFAULT_SETTINGS, built_job, replica_spec, tf_config_of


def test_training_tasks_do_not_see_the_evaluator_but_it_sees_them() -> None:
    job = built_job(
        {"replicaSpecs": {"Chief": replica_spec(1), "Worker": replica_spec(2), "Evaluator": replica_spec(1)}}
    )
    chief = tf_config_of(pod(job, ReplicaType.CHIEF, 0, DEFAULT_SETTINGS))
    evaluator = tf_config_of(pod(job, ReplicaType.EVALUATOR, 0, DEFAULT_SETTINGS))
    assert chief is not None and evaluator is not None
    assert set(chief["cluster"]) == {"chief", "worker"}
    assert evaluator["cluster"] == {**chief["cluster"], "evaluator": ["demo-evaluator-0.demo.team.svc:2222"]}
    assert evaluator["task"] == {"type": "evaluator", "index": 0}
    assert chief["environment"] == "cloud"


def test_single_replica_has_no_tf_config() -> None:
    job = built_job({"strategy": "Mirrored", "replicaSpecs": {"Chief": replica_spec(1)}})
    assert tf_config_of(pod(job, ReplicaType.CHIEF, 0, DEFAULT_SETTINGS)) is None


def test_cluster_domain_and_port() -> None:
    job = built_job({"replicaSpecs": {"Worker": replica_spec(2)}, "port": 4444})
    config = tf_config_of(pod(job, ReplicaType.WORKER, 1, BuildSettings(cluster_domain="corp.example")))
    assert config is not None
    assert config["cluster"]["worker"][1] == "demo-worker-1.demo.team.svc.corp.example:4444"
    assert config["task"] == {"type": "worker", "index": 1}
