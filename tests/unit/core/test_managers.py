"""Whose job it is, from `managedBy` as each kind spells it."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_core.managers import managed_elsewhere
from support.job_builder import JobBuilder


def _job(manager: Any = None) -> dict[str, Any]:
    return JobBuilder().spec(**({} if manager is None else {"managedBy": manager})).obj()


def _tfjob(manager: Any = None) -> dict[str, Any]:
    return JobBuilder().run_policy(**({} if manager is None else {"managedBy": manager})).tfjob()


@pytest.mark.parametrize(
    ("body", "elsewhere"),
    [
        (_job(), None),
        (_job(""), None),
        (_job("disttrain.io/operator"), None),
        (_job("kueue.x-k8s.io/multikueue"), "kueue.x-k8s.io/multikueue"),
        (_job("kubeflow.org/training-operator"), "kubeflow.org/training-operator"),  # not a DistTrainJob's manager
        (_tfjob(), None),
        (_tfjob("kubeflow.org/training-operator"), None),  # the operator stands in for it
        (_tfjob("disttrain.io/operator"), None),
        (_tfjob("kueue.x-k8s.io/multikueue"), "kueue.x-k8s.io/multikueue"),
        ({"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"runPolicy": "junk"}}, None),
    ],
)
def test_a_job_is_this_operator_s_unless_it_names_another_manager(body: dict[str, Any], elsewhere: str | None) -> None:
    assert managed_elsewhere(body) == elsewhere


@pytest.mark.parametrize("value", ["example.com/" + "x" * 60, "multikueue", "Example.com/x", 7, ["a/b"]])
def test_a_value_no_manager_could_have_names_none(value: Any) -> None:
    """Past an older CRD's schema: the job is not left alone, and the reconcile refuses its spec by name."""
    assert managed_elsewhere(_job(value)) is None
    assert managed_elsewhere(_tfjob(value)) is None
