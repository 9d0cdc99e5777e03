"""charts/disttrain for the tests: helm, built from its module and cached, and what `helm template` makes."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from disttrain_dev.go_tools import HELM
from support.kube_cluster import Cluster
from support.repository import ROOT

CHART = ROOT / "charts" / "disttrain"

# Each install mode kustomize offers, its namespace, and the chart's values for it.
MODES: dict[str, tuple[list[str], str, dict[str, Any]]] = {
    "cluster-wide": (["deploy"], "disttrain-system", {}),
    "namespaced": (
        ["deploy/namespaced"],
        "disttrain-system",
        {"scope": "namespaced", "namespaces": ["disttrain"], "metrics": {"grafanaDashboard": False}},
    ),
    "serve TFJobs": (["overlays/serve-tfjobs"], "disttrain-system", {"serveTFJobs": True}),
    "dashboard": (["overlays/dashboard"], "disttrain-system", {"dashboard": {"enabled": True}}),
    "local images": (
        ["overlays/local-images"],
        "disttrain-system",
        {"image": {"pullPolicy": "Never"}, "operator": {"env": [{"name": "DISTTRAIN_PROGRESS_SECONDS", "value": "2"}]}},
    ),
    "Kueue's RBAC": (["deploy", "deploy/kueue-rbac.yaml"], "disttrain-system", {"kueue": {"rbac": True}}),
}


def helm(
    *args: str, values: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """helm with `args` (skips the test where helm cannot be had); `values`, a values file's content, go to
    its standard input (`--values -`)."""
    unavailable = HELM.unavailable()
    if unavailable is not None:
        pytest.skip(unavailable)
    given = None if values is None else yaml.safe_dump(dict(values))
    command = [str(HELM.ensure()), *args, *(["--values", "-"] if values is not None else [])]
    return subprocess.run(command, input=given, capture_output=True, text=True, env=env, check=False)


def template(values: Mapping[str, Any], namespace: str = "disttrain-system") -> list[dict[str, Any]]:
    """The objects `helm template` makes with `values`."""
    result = helm("template", "disttrain", str(CHART), "--namespace", namespace, values=values)
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def kustomized(cluster: Cluster, sources: list[str]) -> list[dict[str, Any]]:
    """The objects an install mode's sources make: kustomize folders (with the cluster's kubectl) and files."""
    made: list[dict[str, Any]] = []
    for source in sources:
        path = ROOT / source
        text = path.read_text() if path.is_file() else cluster.kubectl("kustomize", str(path)).stdout
        made += [item for item in yaml.safe_load_all(text) if item]
    return made
