"""The job `Client.train` makes of a function and its arguments, and every argument it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disttrain.shipped_function import FunctionNotShippableError, ship
from disttrain.train_job import FUNCTION_MOUNT, TrainArgumentError, job_name, train_objects
from disttrain_contract.shipped_call import CALL_FILE, FUNCTION_FILE, RUN_FUNCTION_COMMAND
from disttrain_core.api.spec import ReplicaType, Strategy
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import pod
from disttrain_core.images import TRAINER_IMAGE
from disttrain_core.kueue import QUEUE_LABEL


def fit(strategy: Any, epochs: int = 2, rate: float = 0.1) -> None:
    print(strategy, epochs, rate)


def test_two_workers_run_the_function_from_its_config_map_with_its_arguments() -> None:
    job, function_map = train_objects(ship(fit), namespace="team", parameters={"epochs": 3}, queue="gpus", environ={})
    assert job.spec.strategy is Strategy.MULTI_WORKER_MIRRORED
    assert {kind: spec.replicas for kind, spec in job.spec.replica_specs.items()} == {ReplicaType.WORKER: 2}
    assert job.metadata.labels == {QUEUE_LABEL: "gpus"}
    (container,) = job.spec.replica_specs[ReplicaType.WORKER].template["spec"]["containers"]
    assert container["command"] == [RUN_FUNCTION_COMMAND, FUNCTION_MOUNT]
    assert "image" not in container  # the install's trainer image: no registry holds disttrain/trainer
    built = pod(job, ReplicaType.WORKER, 0, BuildSettings(trainer_image="registry.example.com/team/trainer:7"))
    assert built["spec"]["containers"][0]["image"] == "registry.example.com/team/trainer:7"
    assert pod(job, ReplicaType.WORKER, 0, BuildSettings())["spec"]["containers"][0]["image"] == TRAINER_IMAGE
    named, _ = train_objects(ship(fit), namespace="team", image="mine:1", environ={})
    (own,) = named.spec.replica_specs[ReplicaType.WORKER].template["spec"]["containers"]
    assert own["image"] == "mine:1"
    volume = job.spec.replica_specs[ReplicaType.WORKER].template["spec"]["volumes"][0]
    assert volume["configMap"]["name"] == function_map["metadata"]["name"] == f"{job.metadata.name}-function"
    assert function_map["data"][FUNCTION_FILE].startswith("def fit(strategy: Any")
    call = json.loads(function_map["data"][CALL_FILE])
    assert call == {
        "name": "fit",
        "arguments": {"epochs": 3},
        "takesStrategy": True,
        "takesProgress": False,
        "packages": [],
        "indexUrl": None,
    }


def test_packages_come_from_the_index_given_else_from_the_one_pip_here_is_set_to() -> None:
    def index_of(environ: dict[str, str], index_url: str | None = None) -> object:
        _, function_map = train_objects(ship(fit), namespace="team", index_url=index_url, environ=environ)
        return json.loads(function_map["data"][CALL_FILE])["indexUrl"]

    here = {"PIP_INDEX_URL": "https://pypi.example/simple"}
    assert index_of(here) == "https://pypi.example/simple"
    assert index_of(here, "https://mirror.example/simple") == "https://mirror.example/simple"
    assert index_of({}) is None


def test_an_index_with_credentials_or_a_pip_setting_the_replicas_would_not_see_is_refused() -> None:
    """The index is written in a ConfigMap anyone with `view` reads; an extra index set only here would leave a
    private package's name to pip's default index in the replicas."""
    with pytest.raises(TrainArgumentError, match="PIP_INDEX_URL carries credentials"):
        train_objects(ship(fit), namespace="team", environ={"PIP_INDEX_URL": "https://me:secret@pypi.example/simple"})
    with pytest.raises(TrainArgumentError, match="index_url= carries credentials"):
        train_objects(ship(fit), namespace="team", index_url="https://token@pypi.example/simple", environ={})
    extra = {"PIP_EXTRA_INDEX_URL": "https://private.example/simple"}
    with pytest.raises(TrainArgumentError, match="PIP_EXTRA_INDEX_URL is set here"):
        train_objects(ship(fit), namespace="team", packages=["private-tools"], environ=extra)
    train_objects(ship(fit), namespace="team", environ=extra)  # no packages: nothing to look for
    train_objects(
        ship(fit), namespace="team", packages=["x"], index_url="https://private.example/simple", environ=extra
    )


def test_parameter_servers_make_a_parameter_server_job_with_its_chief() -> None:
    job, _ = train_objects(ship(fit), namespace="team", workers=2, ps=1, resources={"cpu": "1", "gpus": 1})
    assert job.spec.strategy is Strategy.PARAMETER_SERVER
    counts = {kind: spec.replicas for kind, spec in job.spec.replica_specs.items()}
    assert counts == {ReplicaType.CHIEF: 1, ReplicaType.WORKER: 2, ReplicaType.PS: 1}
    (container,) = job.spec.replica_specs[ReplicaType.PS].template["spec"]["containers"]
    assert container["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}


def test_a_generated_name_is_a_short_dns_label() -> None:
    name = job_name("Train_The_Very_Long_Model_Name_That_Goes_On_And_On")
    assert len(name) <= 40 and name.startswith("train-the-very-long")
    assert job_name("digits").startswith("train-digits-")
    assert all(part.isalnum() for part in name.split("-"))


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"workers": 0}, "workers= must be from 1 to 1000, not 0"),
        ({"workers": -2}, "workers= must be from 1 to 1000, not -2"),
        ({"workers": 2.0}, "workers= must be a whole number, not 2.0"),
        ({"workers": True}, "workers= must be a whole number, not True"),
        ({"strategy": "Horovod"}, "strategy= 'Horovod' is not one of MultiWorkerMirrored, ParameterServer, Mirrored"),
        ({"ps": 1, "strategy": "MultiWorkerMirrored"}, "parameter servers go with ParameterServer only"),
        ({"ps": 1, "chief": 0}, "ParameterServer needs chief=1"),
        ({"parameters": {"epochs": float("nan")}}, "parameters= must be JSON"),
        ({"parameters": {"epochs": {1, 2}}}, "parameters= must be JSON"),
        ({"packages": ["numpy>="]}, "packages= 'numpy>=' is not a requirement pip reads"),
        ({"packages": ["--index-url=http://elsewhere"]}, "is not a requirement pip reads"),
        ({"resources": {"cpus": 2}}, "resources= knows cpu, memory and gpus, not cpus"),
    ],
)
def test_an_argument_no_job_could_run_with_is_refused(arguments: dict[str, Any], words: str) -> None:
    with pytest.raises(TrainArgumentError) as refused:
        train_objects(ship(fit), namespace="team", **arguments)
    assert words in str(refused.value)


def test_a_parameter_the_function_does_not_take_is_refused() -> None:
    with pytest.raises(FunctionNotShippableError, match=r"fit\(\) takes no parameter 'batch'"):
        train_objects(ship(fit), namespace="team", parameters={"batch": 8})
