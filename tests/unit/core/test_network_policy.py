"""Each job's NetworkPolicy, held against every pod the operator makes: it selects the job's trainers and
nothing else, admits the job's own pods on every port and the operator's pods (as every install labels
them) on the progress port alone. No NetworkPolicy controller runs on the dev cluster's nodes, so the
selectors are what is proven here; docs/security.md says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain_core import served
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.spec import trainer_container
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler
from disttrain_core.builders.network_policy import NAMESPACE_NAME_LABEL, OPERATOR_LABELS
from disttrain_core.builders.objects import desired_objects
from disttrain_core.types import Manifest
from disttrain_operator.operator_settings import OperatorSettings
from support.repository import EXAMPLES, ROOT, load_one

SETTINGS = [
    BuildSettings(operator_namespace="disttrain-system"),
    BuildSettings(gang_scheduler=GangScheduler.KUBERNETES, gang_by_default=True),
]


def selects(selector: Manifest, labels: dict[str, str]) -> bool:
    """A LabelSelector's meaning (matchLabels; matchExpressions In, NotIn, Exists, DoesNotExist)."""
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for rule in selector.get("matchExpressions") or []:
        key, operator, values = rule["key"], rule["operator"], rule.get("values") or []
        found = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not found:
            return False
    return True


def _jobs() -> list[DistTrainJob]:
    jobs = [parse_job(load_one(path)) for path in EXAMPLES]
    tfjob = {
        key: value for key, value in load_one(ROOT / "tests" / "tfjobs" / "every-field.yaml").items() if key != "status"
    }
    return [*jobs, DistTrainJob.model_validate(served.job_manifest(tfjob))]


def _labels(item: Manifest) -> dict[str, str]:
    return dict(item["metadata"].get("labels") or {})


@pytest.mark.parametrize("settings", SETTINGS, ids=["operator-namespace", "kubernetes-gangs"])
def test_the_policy_closes_every_trainer_to_all_but_its_job_and_the_operator(settings: BuildSettings) -> None:
    for job in _jobs():
        objects = desired_objects(job, settings)
        policies = {item["metadata"]["name"]: item for item in objects if item["kind"] == "NetworkPolicy"}
        policy = policies[job.metadata.name]["spec"]
        pods = [item for item in objects if item["kind"] == "Pod"]
        own, operator = policy["ingress"]
        assert policy["policyTypes"] == ["Ingress"] and pods
        for pod in pods:
            labels = _labels(pod)
            assert selects(policy["podSelector"], labels), pod["metadata"]["name"]
            assert [peer for peer in own["from"] if selects(peer["podSelector"], labels)], "its job reaches it"
            assert "ports" not in own  # collectives open ports of their own beside TensorFlow's
            ports = {port["containerPort"] for port in trainer_container(pod["spec"]["containers"])["ports"]}
            assert operator["ports"] == [{"port": job.spec.progress_port, "protocol": "TCP"}]
            assert {job.spec.port, job.spec.progress_port} <= ports and job.spec.port != job.spec.progress_port
            other = {**labels, **{key: "another-job" for key in own["from"][0]["podSelector"]["matchLabels"]}}
            assert not any(selects(peer["podSelector"], other) for peer in own["from"])  # another job's pod
            assert all("namespaceSelector" not in peer for peer in own["from"])  # its own namespace only
        for item in objects:
            if item["kind"] == "Deployment":  # the TensorBoard: closed by its own policy, not opened by this one
                assert not selects(policy["podSelector"], item["spec"]["template"]["metadata"]["labels"])


def _operator_pod_labels(documents: list[Any]) -> list[dict[str, str]]:
    deployments = [
        d for d in documents if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "disttrain-operator"
    ]
    return [deployment["spec"]["template"]["metadata"]["labels"] for deployment in deployments]


def test_the_operator_every_install_runs_is_the_peer_the_policy_admits() -> None:
    operator = desired_objects(_jobs()[0], SETTINGS[0])[1]["spec"]["ingress"][1]["from"][0]
    assert operator["namespaceSelector"] == {"matchLabels": {NAMESPACE_NAME_LABEL: "disttrain-system"}}
    installs = [
        ROOT / "deploy" / "operator" / "operator.yaml",
        *sorted((ROOT / "tests" / "golden" / "chart").glob("*.yaml")),
    ]
    for path in installs:
        found = _operator_pod_labels(list(yaml.safe_load_all(Path(path).read_text())))
        assert found, path
        assert all(selects(operator["podSelector"], labels) for labels in found), path
        assert all(labels.items() >= OPERATOR_LABELS.items() for labels in found), path


def test_an_install_with_policies_of_its_own_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTTRAIN_NETWORK_POLICY", "false")
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    settings = OperatorSettings.from_environment().build
    assert not settings.network_policy and settings.operator_namespace == "ops"
    kinds = [item["kind"] for item in desired_objects(_jobs()[0], settings)]
    assert "NetworkPolicy" not in kinds
