"""`disttrain convert`: every TFJob field mapped or refused by name, TFJob's defaults kept, notes on
each change of meaning, and the output valid by the same rules as `disttrain render`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from disttrain_cli.convert import convert_text
from disttrain_cli.main import main
from disttrain_cli.render import RenderError, render
from disttrain_core.api import yaml_io
from disttrain_core.api.parsing import parse_job
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.tfjob_conversion import UnconvertibleError, convert
from support.job_builder import JobBuilder
from support.repository import ROOT

EVERY_FIELD = ROOT / "tests" / "tfjobs" / "every-field.yaml"
GOLDEN = ROOT / "tests" / "golden" / "tfjob-every-field.yaml"


def _tfjob(**spec: Any) -> dict[str, Any]:
    return JobBuilder().workers(2).spec(**spec).tfjob()


def test_every_field_converts_as_golden(update_golden: bool) -> None:
    converted = convert_text(EVERY_FIELD.read_text())
    if update_golden:
        GOLDEN.write_text(converted)
    assert converted == GOLDEN.read_text()
    job = parse_job(yaml_io.load_all(converted)[0])
    assert job.spec.port == 2223
    assert [replica_type.value for replica_type in job.spec.replica_specs] == ["Chief", "Worker", "PS", "Evaluator"]


def test_tfjob_defaults_are_written_out() -> None:
    tfjob = _tfjob()
    tfjob["spec"]["tfReplicaSpecs"] = {"worker": {"template": tfjob["spec"]["tfReplicaSpecs"]["Worker"]["template"]}}
    job = convert(tfjob).job
    assert job["spec"]["replicaSpecs"] == {"Worker": {"replicas": 1, "restartPolicy": "Never", **_template()}}
    assert job["spec"]["strategy"] == "Mirrored"
    assert "port" not in job["spec"]  # 2222, the same default on both sides


def _template() -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": "tensorflow", "image": "i"}]}}}


def test_ps_without_chief_converts_and_worker_zero_leads() -> None:
    tfjob = _tfjob()
    tfjob["spec"]["tfReplicaSpecs"]["PS"] = {"replicas": 2, **_template()}
    job = parse_job({**convert(tfjob).job, "metadata": {"name": "job", "namespace": "team"}})
    assert job.spec.strategy.value == "ParameterServer"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda t: t["spec"].update(enableDynamicWorker=True), "spec.enableDynamicWorker"),
        (lambda t: t["spec"].update(runPolicy={"managedBy": 7}), "spec.runPolicy.managedBy"),
        (
            lambda t: t["spec"].update(runPolicy={"schedulingPolicy": {"minResources": {"cpu": "4"}}}),
            "spec.runPolicy.schedulingPolicy.minResources",
        ),
        (lambda t: t["spec"].update(runPolicy={"cleanPodPolicy": "Sometimes"}), "spec.runPolicy.cleanPodPolicy"),
        (lambda t: t["spec"].update(runPolicy={"backoffLimitPerIndex": 1}), "spec.runPolicy.backoffLimitPerIndex"),
        (lambda t: t["spec"].update(successPolicy="AnyWorker"), "spec.successPolicy"),
        (lambda t: t["spec"].update(elasticPolicy={}), "spec.elasticPolicy"),
        (lambda t: t["spec"]["tfReplicaSpecs"].update(Launcher=_template()), "spec.tfReplicaSpecs.Launcher"),
        (lambda t: t["spec"]["tfReplicaSpecs"]["Worker"].update(restartPolicy="Sometimes"), "restartPolicy"),
        (lambda t: t["spec"]["tfReplicaSpecs"]["Worker"].update(replicas="2"), "spec.tfReplicaSpecs.Worker.replicas"),
        (lambda t: t["spec"]["tfReplicaSpecs"]["Worker"].update(minReplicas=1), "Worker.minReplicas"),
        (lambda t: t["spec"]["tfReplicaSpecs"].update(chief=_template(), Master=_template()), "tfReplicaSpecs.Master"),
        (lambda t: t.update(apiVersion="kubeflow.org/v1beta2"), "apiVersion"),
        (lambda t: t["metadata"].update(nmae="typo"), "metadata.nmae"),
    ],
)
def test_a_field_without_equivalent_is_refused_by_name(change: Any, field: str) -> None:
    tfjob = _tfjob()
    change(tfjob)
    with pytest.raises(UnconvertibleError) as raised:
        convert(tfjob)
    assert field in raised.value.field


@pytest.mark.parametrize(
    ("manager", "expected"),
    [("kueue.x-k8s.io/multikueue", "kueue.x-k8s.io/multikueue"), ("kubeflow.org/training-operator", None)],
)
def test_managed_by_is_carried_but_training_operator_s_own_value_means_the_operator(
    manager: str, expected: str | None
) -> None:
    tfjob = _tfjob()
    tfjob["spec"]["runPolicy"] = {"managedBy": manager}
    conversion = convert(tfjob)
    assert conversion.job["spec"].get("managedBy") == expected
    assert any(manager in note for note in conversion.notes)
    parse_job({**conversion.job, "metadata": {"name": "job", "namespace": "team"}})  # a valid DistTrainJob


def test_replica_types_on_different_ports_are_refused() -> None:
    tfjob = _tfjob()
    ps = copy.deepcopy(_template())
    ps["template"]["spec"]["containers"][0]["ports"] = [{"name": "tfjob-port", "containerPort": 3333}]
    tfjob["spec"]["tfReplicaSpecs"]["PS"] = ps
    with pytest.raises(UnconvertibleError, match=r"3333 \(PS\)") as raised:
        convert(tfjob)
    assert "2222 (Worker)" in str(raised.value)


@pytest.mark.parametrize(
    ("run_policy", "replica_specs", "expected"),
    [
        ({}, {}, "cleanPodPolicy Running (disttrain's default)"),
        ({"cleanPodPolicy": "None"}, {"PS": {"replicas": 1, **_template()}}, "leaves the PS pods running"),
        ({}, {}, "backoffLimit 6 (disttrain's default)"),
        ({}, {"Evaluator": _template()}, "an Evaluator's failure no longer fails the job"),
        ({}, {"Worker": {"replicas": 2, "restartPolicy": "OnFailure", **_template()}}, "restarts the whole job"),
    ],
)
def test_a_change_of_meaning_is_noted(run_policy: dict[str, Any], replica_specs: dict[str, Any], expected: str) -> None:
    tfjob = _tfjob(runPolicy=run_policy)
    tfjob["spec"]["tfReplicaSpecs"].update(replica_specs)
    assert any(expected in note for note in convert(tfjob).notes)


def test_restarts_of_the_failed_pod_alone_are_not_noted_under_parameter_server() -> None:
    tfjob = _tfjob()
    tfjob["spec"]["tfReplicaSpecs"]["PS"] = {"replicas": 1, "restartPolicy": "OnFailure", **_template()}
    tfjob["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    assert not any("whole job" in note for note in convert(tfjob).notes)


def test_a_list_and_other_documents_convert_in_one_stream() -> None:
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}}
    listed = {"apiVersion": "v1", "kind": "List", "items": [_tfjob(), {**_tfjob(), "metadata": {"name": "two"}}]}
    output = convert_text(yaml_io.dump_all([listed, pvc]))
    documents = yaml_io.load_all(output)
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("DistTrainJob", "job"),
        ("DistTrainJob", "two"),
        ("PersistentVolumeClaim", "data"),
    ]
    assert output.count("# Converted from TFJob") == 2


def test_the_first_unconvertible_document_is_named() -> None:
    bad = _tfjob(enableDynamicWorker=True)
    bad["metadata"]["name"] = "dynamic"
    with pytest.raises(RenderError, match=r"document 2 \(dynamic\) cannot be converted: spec.enableDynamicWorker"):
        convert_text(yaml_io.dump_all([_tfjob(), bad]))


def test_a_conversion_the_rules_refuse_says_which_rule() -> None:
    tfjob = _tfjob()
    tfjob["spec"]["tfReplicaSpecs"]["Chief"] = {"replicas": 2, **_template()}
    with pytest.raises(RenderError, match=r"converts to an invalid DistTrainJob:\n.*at most one Chief"):
        convert_text(yaml_io.dump_all([tfjob]))


def test_input_without_tfjobs_is_an_error() -> None:
    with pytest.raises(RenderError, match="no TFJob"):
        convert_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")


def test_the_command_exits_non_zero_naming_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml_io.dump_all([_tfjob(enableDynamicWorker=True)]))
    assert main(["convert", str(path)]) == 1
    assert f"error: {path}: document 1 (job) cannot be converted" in capsys.readouterr().err
    assert main(["convert", str(EVERY_FIELD)]) == 0
    assert "kind: DistTrainJob" in capsys.readouterr().out


def test_a_generated_name_converts_and_renders_as_the_api_server_would_name_it() -> None:
    tfjob = _tfjob()
    tfjob["metadata"] = {"generateName": "mnist-"}
    tfjob["spec"]["tfReplicaSpecs"]["PS"] = {"replicas": 1, "restartPolicy": "OnFailure", **_template()}
    converted = convert_text(yaml_io.dump_all([tfjob]))
    assert "# Converted from TFJob mnist-* by" in converted
    job = yaml_io.load_all(converted)[0]
    assert job["metadata"] == {"generateName": "mnist-"}
    pods = [item for item in yaml_io.load_all(render(converted, BuildSettings())) if item["kind"] == "Pod"]
    assert [pod["metadata"]["name"] for pod in pods] == [
        "mnist-xxxxx-worker-0",
        "mnist-xxxxx-worker-1",
        "mnist-xxxxx-ps-0",
    ]


@pytest.mark.parametrize(("asked", "gang"), [(2, 2), (3, 2), (4, 4)])
def test_a_min_available_counting_the_evaluator_asks_for_the_training_pods_and_one_above_every_pod_stays(
    asked: int, gang: int
) -> None:
    """Two workers and an Evaluator: training-operator's 3 counted the Evaluator, so the gang is both workers;
    4 is more than every pod of the job, which training-operator held until lowered, and so does the operator
    (`Gang.oversized`)."""
    tfjob = _tfjob(runPolicy={"schedulingPolicy": {"minAvailable": asked}})
    tfjob["spec"]["tfReplicaSpecs"]["Evaluator"] = {"replicas": 1, **_template()}
    converted = convert(tfjob)
    assert converted.job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == gang
    assert any("counts pods beside the Chief" in note for note in converted.notes) == (asked == 3)
