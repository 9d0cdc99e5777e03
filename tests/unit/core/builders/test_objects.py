"""What the builders make of a job: golden files for every example, and the rules of each pod, claim and label."""

from __future__ import annotations

from pathlib import Path

import pytest

from disttrain_cli.render import render
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType
from disttrain_core.builders.objects import desired_objects, pod
from support.builder_inputs import DEFAULT_SETTINGS, GOLDEN, built_job, replica_spec
from support.repository import EXAMPLES, ROOT, load_one


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_render_matches_golden(example: Path, update_golden: bool) -> None:
    golden = GOLDEN / example.name
    rendered = render(example.read_text(), DEFAULT_SETTINGS)
    if update_golden:
        golden.write_text(rendered)
    assert rendered == golden.read_text()


def test_render_is_deterministic() -> None:
    text = EXAMPLES[0].read_text()
    assert render(text, DEFAULT_SETTINGS) == render(text, DEFAULT_SETTINGS)


def test_parameter_server_objects() -> None:
    job = parse_job(load_one(ROOT / "examples" / "parameter-server.yaml"))
    objects = desired_objects(job, DEFAULT_SETTINGS)
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
    job = built_job({"replicaSpecs": {"Worker": {"replicas": 2, "template": template}}})
    built = pod(job, ReplicaType.WORKER, 0, DEFAULT_SETTINGS)
    sidecar, tensorflow = built["spec"]["containers"]
    assert "env" not in sidecar and "ports" not in sidecar
    names = [entry["name"] for entry in tensorflow["env"]]
    assert names == ["A", "TF_CONFIG", "DISTTRAIN_PROGRESS_PORT", "DISTTRAIN_TERMINATION_MESSAGE_PATH"]
    assert [port["name"] for port in tensorflow["ports"]] == ["tf-port", "progress"]


def test_first_container_without_a_tensorflow_one_and_user_port_kept() -> None:
    job = built_job(
        {"replicaSpecs": {"Worker": replica_spec(2, name="main", ports=[{"name": "grpc", "containerPort": 2222}])}}
    )
    container = pod(job, ReplicaType.WORKER, 0, DEFAULT_SETTINGS)["spec"]["containers"][0]
    assert container["ports"] == [
        {"name": "grpc", "containerPort": 2222},
        {"name": "progress", "containerPort": 9471, "protocol": "TCP"},
    ]
    assert any(entry["name"] == "TF_CONFIG" for entry in container["env"])


def test_resources_are_carried_untouched() -> None:
    resources = {"limits": {"nvidia.com/gpu": 2, "memory": "8Gi"}, "requests": {"cpu": "500m"}}
    job = built_job({"replicaSpecs": {"Worker": replica_spec(2, resources=resources)}})
    assert pod(job, ReplicaType.WORKER, 1, DEFAULT_SETTINGS)["spec"]["containers"][0]["resources"] == resources


def test_pods_never_restart_in_place_the_operator_decides() -> None:
    for policy in ("Never", "ExitCode", "OnFailure", "Always"):
        job = built_job({"replicaSpecs": {"Worker": {**replica_spec(2), "restartPolicy": policy}}})
        assert pod(job, ReplicaType.WORKER, 0, DEFAULT_SETTINGS)["spec"]["restartPolicy"] == "Never"


def test_the_run_policy_s_grace_period_is_every_pod_s_and_else_the_template_s_own() -> None:
    """The time a pod taken away has to save: one field for every replica, over what a template says."""
    own = {
        **replica_spec(2),
        "template": {"spec": {"terminationGracePeriodSeconds": 45, "containers": [{"name": "c", "image": "i"}]}},
    }
    job = built_job({"replicaSpecs": {"Worker": own, "Chief": replica_spec(1)}})
    assert pod(job, ReplicaType.WORKER, 0, DEFAULT_SETTINGS)["spec"]["terminationGracePeriodSeconds"] == 45
    assert "terminationGracePeriodSeconds" not in pod(job, ReplicaType.CHIEF, 0, DEFAULT_SETTINGS)["spec"]
    replicas = {"Worker": own, "Chief": replica_spec(1)}
    job = built_job({"replicaSpecs": replicas, "runPolicy": {"terminationGracePeriodSeconds": 120}})
    graces = {
        pod(job, kind, 0, DEFAULT_SETTINGS)["spec"]["terminationGracePeriodSeconds"] for kind in job.spec.replica_specs
    }
    assert graces == {120}


def test_owner_references_once_the_job_has_a_uid() -> None:
    spec = {"replicaSpecs": {"Worker": replica_spec(2)}, "checkpoint": {"size": "1Gi"}}
    assert all("ownerReferences" not in item["metadata"] for item in desired_objects(built_job(spec), DEFAULT_SETTINGS))
    for item in desired_objects(built_job(spec, uid="1234"), DEFAULT_SETTINGS):
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
    spec = {"replicaSpecs": {"Worker": replica_spec(2)}, "checkpoint": {"size": "5Gi", "storageClassName": "fast"}}
    claim, *_ = (
        item for item in desired_objects(built_job(spec), DEFAULT_SETTINGS) if item["kind"] == "PersistentVolumeClaim"
    )
    assert claim["metadata"]["name"] == "demo-checkpoint"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "5Gi"}},
        "storageClassName": "fast",
    }
    worker = pod(built_job(spec), ReplicaType.WORKER, 0, DEFAULT_SETTINGS)
    container = worker["spec"]["containers"][0]
    assert container["volumeMounts"] == [{"name": "disttrain-checkpoint", "mountPath": "/checkpoints"}]
    assert {"name": "DISTTRAIN_CHECKPOINT_DIR", "value": "/checkpoints"} in container["env"]


def test_labels_merge_template_labels() -> None:
    template = {
        "metadata": {"labels": {"team": "ml", "disttrain.io/job-name": "spoofed"}},
        "spec": {"containers": [{"name": "t", "image": "i"}]},
    }
    job = built_job({"replicaSpecs": {"Worker": {"replicas": 2, "template": template}}})
    labels = pod(job, ReplicaType.WORKER, 1, DEFAULT_SETTINGS)["metadata"]["labels"]
    assert labels == {
        "team": "ml",
        "disttrain.io/job-name": "demo",
        "disttrain.io/replica-type": "worker",
        "disttrain.io/replica-index": "1",
    }


def test_builders_do_not_mutate_the_job() -> None:
    job = built_job({"replicaSpecs": {"Worker": replica_spec(2)}, "checkpoint": {"size": "1Gi"}})
    before = job.model_dump()
    desired_objects(job, DEFAULT_SETTINGS)
    assert job.model_dump() == before
