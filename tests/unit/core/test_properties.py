"""Properties that hold for every job the CRD accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from disttrain_contract.progress import DEFAULT_PROGRESS_PORT
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import ReplicaType, trainer_container
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import desired_objects
from disttrain_core.builders.tfconfig import tf_config

NAMES = st.from_regex(r"\A[a-z]([-a-z0-9]{0,60}[a-z0-9])?\Z", fullmatch=True)
NAMESPACES = st.from_regex(r"\A[a-z]([-a-z0-9]{0,20}[a-z0-9])?\Z", fullmatch=True)
TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}


@st.composite
def job_manifests(draw: st.DrawFn) -> dict[str, Any]:
    strategy = draw(st.sampled_from(["MultiWorkerMirrored", "ParameterServer", "Mirrored"]))
    if strategy == "Mirrored":
        counts = {draw(st.sampled_from(["Chief", "Worker"])): 1}
    elif strategy == "ParameterServer":
        counts = {"Chief": 1, "Worker": draw(st.integers(1, 120)), "PS": draw(st.integers(1, 12))}
        counts["Evaluator"] = draw(st.integers(0, 1))
    else:
        counts = {
            "Chief": draw(st.integers(0, 1)),
            "Worker": draw(st.integers(0, 150)),
            "Evaluator": draw(st.integers(0, 1)),
        }
        if counts["Chief"] + counts["Worker"] == 0:
            counts["Worker"] = 1
    return {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": draw(NAMES), "namespace": draw(NAMESPACES)},
        "spec": {
            "strategy": strategy,
            "replicaSpecs": {kind: {"replicas": count, "template": TEMPLATE} for kind, count in counts.items()},
            "port": draw(st.integers(1, 65535).filter(lambda port: port != DEFAULT_PROGRESS_PORT)),
        },
    }


def _longest_pod_name(manifest: dict[str, Any]) -> int:
    name = manifest["metadata"]["name"]
    return max(
        len(f"{name}-{kind.lower()}-{max(spec['replicas'] - 1, 0)}")
        for kind, spec in manifest["spec"]["replicaSpecs"].items()
    )


@settings(max_examples=150, deadline=None)
@given(job_manifests())
def test_accepted_iff_every_pod_name_fits_and_then_names_and_addresses_hold(manifest: dict[str, Any]) -> None:
    try:
        job = parse_job(manifest)
    except InvalidManifestError as error:
        assert _longest_pod_name(manifest) > 63, str(error)
        assert "metadata.name is too long" in str(error)
        return
    assert _longest_pod_name(manifest) <= 63

    objects = desired_objects(job, BuildSettings())
    pods = [item for item in objects if item["kind"] == "Pod"]
    assert len(pods) == job.spec.total_replicas
    names = [(item["kind"], item["metadata"]["name"]) for item in objects]
    assert len(set(names)) == len(names)
    for item in pods:
        assert len(item["metadata"]["name"]) <= 63
        assert item["spec"]["hostname"] == item["metadata"]["name"]

    addresses: list[str] = []
    for item in pods:
        labels = item["metadata"]["labels"]
        replica_type = ReplicaType.from_task_type(labels["disttrain.io/replica-type"])
        index = int(labels["disttrain.io/replica-index"])
        config = tf_config(job, replica_type, index, BuildSettings())
        if job.spec.total_replicas == 1:
            assert config is None
            continue
        assert config is not None
        own = config["cluster"][replica_type.task_type][index]
        assert own.startswith(f"{item['metadata']['name']}.{job.metadata.name}.{job.metadata.namespace}.svc:")
        assert config["task"] == {"type": replica_type.task_type, "index": index}
        env = trainer_container(item["spec"]["containers"])["env"]
        assert any(entry["name"] == "TF_CONFIG" for entry in env)
        addresses.append(own)
    assert len(set(addresses)) == len(addresses)
