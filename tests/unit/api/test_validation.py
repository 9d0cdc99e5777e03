"""`render`'s validation gives the CRD's verdict and messages on every corpus manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from disttrain_core.api.validation import InvalidManifestError, validated
from support.repository import EXAMPLES, INVALID_CORPUS, VALID_CORPUS, expected_message, load_one


@pytest.mark.parametrize("path", EXAMPLES + VALID_CORPUS, ids=lambda path: path.stem)
def test_valid_manifests_pass(path: Path) -> None:
    validated(load_one(path))


@pytest.mark.parametrize("path", INVALID_CORPUS, ids=lambda path: path.stem)
def test_invalid_manifests_fail_with_the_rule_message(path: Path) -> None:
    with pytest.raises(InvalidManifestError) as raised:
        validated(load_one(path))
    assert expected_message(path) in str(raised.value)


def test_defaults_are_applied_like_the_api_server() -> None:
    document = validated(load_one(VALID_CORPUS[0].with_name("minimal-worker.yaml")))
    spec = document["spec"]
    assert spec["strategy"] == "MultiWorkerMirrored"
    assert spec["port"] == 2222
    assert spec["successPolicy"] == "Default"
    assert spec["replicaSpecs"]["Worker"] == {
        "replicas": 1,
        "restartPolicy": "Never",
        "template": spec["replicaSpecs"]["Worker"]["template"],
    }
    assert spec["runPolicy"] == {
        "backoffLimit": 6,
        "cleanPodPolicy": "Running",
        "suspend": False,
        "finalEvaluationSeconds": 600,
    }


def test_nulls_are_pruned_before_defaults() -> None:
    document = validated(load_one(VALID_CORPUS[0].with_name("null-optional.yaml")))
    assert "checkpoint" not in document["spec"]
    assert "activeDeadlineSeconds" not in document["spec"]["runPolicy"]


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ([1, 2], "a manifest must be a mapping"),
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}, 'must be "disttrain.io/v1alpha1"'),
        ({"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {}}, "needs a name"),
        ({"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {"name": "x"}}, "spec: Required"),
    ],
)
def test_identity_errors(manifest: object, message: str) -> None:
    with pytest.raises(InvalidManifestError, match=message):
        validated(manifest)


def test_every_violation_is_reported_at_once() -> None:
    manifest = load_one(INVALID_CORPUS[0].with_name("template-typo.yaml"))
    manifest["spec"]["port"] = 0
    with pytest.raises(InvalidManifestError) as raised:
        validated(manifest)
    paths = {violation.path for violation in raised.value.violations}
    assert {"spec.port", "spec.replicaSpecs.Worker.template.spec.containers[0].comand"} <= paths
