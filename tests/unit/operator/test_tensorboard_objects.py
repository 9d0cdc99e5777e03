"""A job's TensorBoard as the operator makes it: what is built for `spec.tensorboard` (and refused without a
volume), the Warning a refusal is worth, and a refusal that never fails the training. What its Deployment's
state says in the job's status: tests/unit/core/test_tensorboard_status.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from disttrain_cli.main import main
from disttrain_core.api import yaml_io
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.validation import InvalidManifestError, validated
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import desired_objects
from disttrain_core.tensorboard_status import TensorBoardView, with_tensorboard
from disttrain_core.types import Verdict
from disttrain_kube.api_errors import RefusedError
from disttrain_operator.job_memory import JobMemory
from disttrain_operator.reconciler import Reconciler
from disttrain_operator.status_writer import StatusWriter
from support.fakes import RecordingApi
from support.job_builder import JobBuilder

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _manifest(tensorboard: dict[str, Any] | None, checkpoint: bool = True) -> dict[str, Any]:
    pod = {"securityContext": {"runAsUser": 1000, "fsGroup": 2000}}
    builder = JobBuilder("mnist", "team").metadata(uid="u1", generation=1)
    builder.workers(2, {"image": "registry.example/trainer:1"}, pod=pod)
    if checkpoint:
        builder.spec(checkpoint={"size": "1Gi"})
    return builder.spec(**({"tensorboard": tensorboard} if tensorboard is not None else {})).obj()


def _job(tensorboard: dict[str, Any] | None) -> DistTrainJob:
    return DistTrainJob.model_validate(_manifest(tensorboard))


def test_the_job_owns_a_restricted_tensorboard_reading_its_volume_and_its_trainers_write_there() -> None:
    built = {(item["kind"], item["metadata"]["name"]): item for item in desired_objects(_job({}), BuildSettings())}
    deployment = built["Deployment", "mnist-tensorboard"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/trainer:1"  # the trainer's, which ships TensorBoard
    assert container["args"][:2] == ["--logdir", "/checkpoints/tensorboard"]
    assert container["volumeMounts"][0]["readOnly"] and pod["volumes"][0]["persistentVolumeClaim"]["readOnly"]
    assert pod["securityContext"] == {
        "runAsUser": 1000,
        "fsGroup": 2000,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == "u1"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert built["Service", "mnist-tensorboard"]["spec"]["selector"] == selector
    assert "disttrain.io/job-name" not in selector  # the job's headless Service must not select it
    assert pod["automountServiceAccountToken"] is False  # TensorBoard needs no API access
    policy = built["NetworkPolicy", "mnist-tensorboard"]["spec"]
    assert policy["podSelector"]["matchLabels"] == selector
    assert policy["ingress"] == [{"from": [{"podSelector": {}}], "ports": [{"port": "http", "protocol": "TCP"}]}]
    worker = built["Pod", "mnist-worker-0"]["spec"]["containers"][0]
    assert {"name": "DISTTRAIN_TENSORBOARD_DIR", "value": "/checkpoints/tensorboard/mnist"} in worker["env"]
    custom = _job({"image": "tensorboard:2", "resources": {"limits": {"memory": "2Gi"}}})
    (board,) = [item for item in desired_objects(custom, BuildSettings()) if item["kind"] == "Deployment"]
    assert board["spec"]["template"]["spec"]["containers"][0]["image"] == "tensorboard:2"
    assert board["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"memory": "2Gi"}}
    assert not [
        item for item in desired_objects(_job({"enabled": False}), BuildSettings()) if item["kind"] == "Deployment"
    ]


def test_a_tensorboard_without_a_checkpoint_volume_is_refused_with_why() -> None:
    with pytest.raises(InvalidManifestError, match="spec: tensorboard needs a checkpoint volume"):
        validated(_manifest({}, checkpoint=False))
    validated(_manifest({"enabled": False}, checkpoint=False))


class _Api:
    def __init__(self) -> None:
        self.statuses: list[dict[str, Any]] = []

    def patch_job_status(self, job: Any, status: dict[str, Any]) -> None:
        self.statuses.append(status)


def test_a_refused_tensorboard_is_one_warning_event() -> None:
    events: list[tuple[str, str]] = []
    writer = StatusWriter(_Api(), lambda body, **event: events.append((event["type"], event["reason"])), lambda: NOW)
    job, memory = _job({}), JobMemory()
    body = _manifest({})
    refused = TensorBoardView("mnist-tensorboard", ready=False, problem=Verdict("FailedCreate", "exceeded quota"))
    for view in (None, refused, refused, TensorBoardView("mnist-tensorboard", ready=True)):
        writer.write(body, memory, with_tensorboard(job, job.status, view, NOW))
    assert events == [("Warning", "FailedCreate"), ("Normal", "TensorBoardReady")]


def test_render_shows_the_tensorboard_it_would_make(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(json.dumps(_manifest({})))
    assert main(["render", str(manifest)]) == 0
    documents = yaml_io.load_all(capsys.readouterr().out)
    assert [(d["kind"], d["metadata"]["name"]) for d in documents][-3:] == [
        ("Deployment", "mnist-tensorboard"),
        ("Service", "mnist-tensorboard"),
        ("NetworkPolicy", "mnist-tensorboard"),
    ]


@pytest.mark.parametrize("length", [40, 51, 52, 54])  # 54: the longest name whose worker pods fit
def test_every_name_a_job_s_tensorboard_takes_fits_a_service_name(length: int) -> None:
    manifest = _manifest({})
    manifest["metadata"]["name"] = "a" * (length - 1) + "b"
    twin = {**manifest, "metadata": {**manifest["metadata"], "name": "a" * (length - 1) + "c"}}
    names = {}
    for each in (manifest, twin):
        job = DistTrainJob.model_validate(validated(each))
        built = [item for item in desired_objects(job, BuildSettings()) if item["kind"] in ("Deployment", "Service")]
        board = {item["metadata"]["name"] for item in built if item["kind"] == "Deployment"}
        (names[job.metadata.name],) = board
        assert all(len(item["metadata"]["name"]) <= 63 for item in built)
        found = with_tensorboard(job, job.status, None, NOW)
        assert found.tensorboard is not None and found.tensorboard.service == names[job.metadata.name]
    assert len(set(names.values())) == 2  # jobs whose names differ only past the cut get different ones


class _RefusingApi(RecordingApi):
    """Refuses the TensorBoard's Deployment, as a quota, a webhook or a bad quantity does."""

    def create(self, manifest: dict[str, Any]) -> bool:
        if manifest["kind"] == "Deployment":
            raise RefusedError(422, 'Deployment "mnist-tensorboard" is invalid: memory: quantities must match')
        return super().create(manifest)


def test_a_tensorboard_the_cluster_refuses_never_fails_the_training() -> None:
    api, events = _RefusingApi(), []
    reconciler = Reconciler(api, BuildSettings(), lambda *_, **event: events.append(event), clock=lambda: NOW)
    body = {**_manifest({"resources": {"limits": {"memory": "lots"}}}), "status": {}}
    reconciler.reconcile(body, [], [])
    assert {"Pod/mnist-worker-0", "Pod/mnist-worker-1", "Service/mnist-tensorboard"} <= set(api.created)
    status = api.statuses[-1]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert status["phase"] == "Pending" and "Failed" not in conditions
    assert conditions["TensorBoardReady"] == ("False", "FailedCreate")
    assert [e["reason"] for e in events if e["type"] == "Warning"] == ["FailedCreate"]
    created = len(api.created)
    reconciler.reconcile({**body, "status": status}, [], [])  # refused once for this spec: not asked again
    assert len(api.created) == created
