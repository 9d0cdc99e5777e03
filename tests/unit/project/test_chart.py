"""charts/disttrain: `helm lint --strict`, what `helm template` makes for each install mode (golden files, the
CRDs apart), a wrong value refused at install with its path named, and the README's table of values made
from values.yaml. tests/integration/test_helm_chart.py installs it, and compares it with deploy/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain_core.api.crd import KEPT_ON_UNINSTALL as KEPT
from disttrain_core.images import VERSION
from disttrain_dev import chart_readme
from support.chart_support import CHART, helm, template
from support.repository import ROOT

GOLDEN = ROOT / "tests" / "golden" / "chart"
GOTOOL = pytest.mark.gotool  # runs helm, built from its Go module
# Each install mode's values; the golden file of each is tests/golden/chart/<mode>.yaml.
MODES: dict[str, dict[str, Any]] = {
    "cluster-wide": {},
    "namespaced": {"scope": "namespaced", "namespaces": ["team-a", "team-b"], "createNamespace": True},
    "everything": {
        "scope": "namespaced",
        "namespaces": ["team-a"],
        "serveTFJobs": True,
        "createNamespace": True,
        "gang": {"scheduler": "volcano", "byDefault": True},
        "image": {"registry": "registry.example.com/", "tag": "0.1.1", "pullPolicy": "Always"},
        "operator": {
            "replicas": 3,
            "env": [{"name": "DISTTRAIN_RECONCILE_WORKERS", "value": "8"}],
            "nodeSelector": {"pool": "system"},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        },
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "dashboard": {"enabled": True, "authenticate": False},
        "kueue": {"rbac": True},
    },
    "one-replica": {"operator": {"replicas": 1, "leaderElection": False}, "metrics": {"grafanaDashboard": False}},
}


@GOTOOL
def test_the_chart_lints_strictly() -> None:
    result = helm("lint", "--strict", str(CHART))
    assert result.returncode == 0, result.stdout + result.stderr


@GOTOOL
@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_install_mode_renders_its_golden_objects(mode: str, update_golden: bool) -> None:
    objects = [item for item in template(MODES[mode]) if item["kind"] != "CustomResourceDefinition"]
    rendered = yaml.safe_dump_all(objects, sort_keys=True)
    golden = GOLDEN / f"{mode}.yaml"
    if update_golden:
        golden.write_text(rendered)
    assert rendered == golden.read_text()


def _crd(path: Path) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    crd["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
    return crd


@GOTOOL
def test_the_crds_are_the_generated_ones_kept_on_uninstall() -> None:
    """Templates, so that `helm upgrade` upgrades them: crds/, as `disttrain crd generate` made it, and kept."""
    crds = {
        item["metadata"]["name"]: item
        for item in template({"serveTFJobs": True})
        if item["kind"].endswith("Definition")
    }
    assert crds == {
        "disttrainjobs.disttrain.io": _crd(ROOT / "crds" / "disttrain.io_disttrainjobs.yaml"),
        "tfjobs.kubeflow.org": _crd(ROOT / "crds" / "tfjob" / "kubeflow.org_tfjobs.yaml"),
    }
    assert not [item for item in template({"crds": {"enabled": False}}) if item["kind"].endswith("Definition")]


@GOTOOL
@pytest.mark.parametrize("mode", sorted(MODES))
def test_helm_uninstall_keeps_what_deploys_uninstall_keeps(mode: str) -> None:
    """The CRDs (and the users' jobs with them), the roles users read them by, the jobs' namespace: each object
    labelled to stay on uninstall is kept by helm too, and nothing else."""
    objects = template(MODES[mode])
    kept = {item["metadata"]["name"] for item in objects if (item["metadata"].get("labels") or {}).get(KEPT) == "true"}
    annotated = {
        item["metadata"]["name"]
        for item in objects
        if (item["metadata"].get("annotations") or {}).get("helm.sh/resource-policy") == "keep"
    }
    assert annotated == kept
    assert {"disttrainjobs.disttrain.io", "disttrain-edit", "disttrain-view"} <= kept


@GOTOOL
@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("operator.replicas=two", "/operator/replicas"),
        ("scope=everywhere", "/scope"),
        ("gang.scheduler=kube-batch", "/gang/scheduler"),
        ("operator.leaderElection=false", "/operator/leaderElection"),  # two replicas would both act
        ("operator.replica=3", "replica"),
        ("image.registry=registry.example.com", "/image/registry"),
        ("operator.env[0].name=X,operator.env[0].value=8", "/operator/env/0/value"),  # a number, not a string
        ("scope=namespaced", "scope namespaced needs namespaces"),
        ("scope=namespaced,namespaces={default}", "may not hold the release's own namespace default"),
        ("namespaces={Team_A}", "/namespaces/0"),
        ("trainerImage.repository=Team/Trainer", "/trainerImage/repository"),  # no image reference
        ("trainerImage.tag=1 --privileged", "/trainerImage/tag"),
    ],
)
def test_a_wrong_value_fails_at_install_with_its_path(value: str, named: str) -> None:
    result = helm("template", "disttrain", str(CHART), "--set", value)
    assert result.returncode != 0
    assert named in result.stderr, result.stderr


def test_the_readme_table_is_made_from_values_yaml() -> None:
    """Every value is described, itself or as part of a described mapping (`operator.resources`)."""
    assert (CHART / "README.md").read_text() == chart_readme.readme(CHART)
    text = (CHART / "values.yaml").read_text()
    described = {path for path, _ in chart_readme.described(text)}
    undescribed = [
        path
        for path in _leaves(yaml.safe_load(text))
        if not any(".".join(path.split(".")[:end]) in described for end in range(1, path.count(".") + 2))
    ]
    assert undescribed == []


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of the values that are not mappings, or are empty ones."""
    paths: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        paths += _leaves(value, f"{path}.") if isinstance(value, dict) and value else [path]
    return paths


def test_the_chart_installs_this_version_s_images() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION
