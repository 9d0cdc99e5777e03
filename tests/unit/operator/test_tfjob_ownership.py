"""TFJobs are served only with disttrain's own TFJob CRD, or one adopted once its controller is gone."""

from __future__ import annotations

from disttrain_core.api import crd
from disttrain_operator.tfjob_ownership import refusal


def test_tfjobs_are_served_only_with_disttrain_s_own_crd_unless_adopted() -> None:
    ours = crd.tfjob_resource_definition()
    theirs = {"metadata": {"name": "tfjobs.kubeflow.org", "labels": {}}}
    assert refusal(ours, adopt=False) is None
    assert "not disttrain's" in (refusal(theirs, adopt=False) or "")
    assert refusal(theirs, adopt=True) is None
    assert "not installed" in (refusal(None, adopt=True) or "")
