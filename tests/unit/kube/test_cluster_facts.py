"""What the operator's settings become on the cluster it reads at its start."""

from __future__ import annotations

import pytest

from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import WorkloadApi
from disttrain_kube.cluster_facts import ClusterFacts


@pytest.mark.parametrize(
    ("version", "allowed", "restarts_in_place"),
    [
        ("v1.34.2", True, False),  # its kubelets ignore restartPolicyRules: the pods would never restart in place
        ("v1.35.4", True, True),
        ("v1.37.2", True, True),
        ("v1.37.2", False, False),  # the install turned it off (DISTTRAIN_RESTART_IN_PLACE=false)
        ("v1.38.0-alpha.1", True, True),
        ("", True, True),  # a version that names no minor is taken as the newest
    ],
)
def test_restarts_in_place_only_where_the_install_allows_them_and_the_cluster_s_version_serves_them(
    version: str, allowed: bool, restarts_in_place: bool
) -> None:
    facts = ClusterFacts(version, WorkloadApi.V1BETA1)
    settings = facts.build_settings(BuildSettings(restart_in_place=allowed))
    assert (settings.restart_in_place, settings.workload_api) == (restarts_in_place, WorkloadApi.V1BETA1)
