"""charts/disttrain on the local cluster: for each install mode it makes what deploy/ (kustomize) makes, and on
the real node `helm install` runs the operator, `helm upgrade` to a chart whose CRD gained a field serves the
field while a job keeps running, and `helm uninstall` keeps the CRDs and the jobs."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain_core.images import VERSION
from disttrain_dev import cluster as devcluster
from disttrain_dev import images, node_kinds, readme, real_node
from disttrain_dev.polling import wait_for
from support.chart_support import CHART, MODES, helm, kustomized, template
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods
from support.rbac_rights import AUDIT_TIME, refused_rights
from support.repository import ROOT

# Objects kustomize gives a namespace although the API server keeps none for them (cluster-scoped).
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


def _comparable(objects: list[dict[str, Any]], namespace: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The objects by kind, namespace and name, as the API server would hold them: namespaced ones in
    `namespace` where they name none (as `helm install -n` puts them), cluster-scoped ones in none; the
    rules of a role in any order; the chart's keep policy apart (it has no kustomize counterpart)."""
    kept: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in objects:
        metadata = item["metadata"]
        if item["kind"] in CLUSTER_SCOPED:
            metadata.pop("namespace", None)
        else:
            metadata.setdefault("namespace", namespace)
        annotations = metadata.pop("annotations", {}) or {}
        annotations.pop("helm.sh/resource-policy", None)
        if annotations:
            metadata["annotations"] = annotations
        if item["kind"] in {"Role", "ClusterRole"}:
            item["rules"] = sorted(item["rules"], key=json.dumps)
        kept[(item["kind"], metadata.get("namespace", ""), metadata["name"])] = item
    return kept


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_chart_makes_what_kustomize_makes(cluster: Cluster, mode: str) -> None:
    sources, namespace, values = MODES[mode]
    made = kustomized(cluster, sources)
    charted = template({**values, "createNamespace": True}, namespace)
    expected, actual = _comparable(made, namespace), _comparable(charted, namespace)
    assert sorted(actual) == sorted(expected)
    for key, item in expected.items():
        assert actual[key] == item, key


RELEASE_NAMESPACE = "disttrain-system"  # README's
PROBE_FIELD = "helmUpgradeProbe"
MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()


@pytest.fixture(scope="module")
def helm_cluster(cluster: Cluster, operator: OperatorProcess) -> Iterator[Cluster]:
    """The cluster with its real node and the images loaded, the operator's namespace placing its pods there;
    the suite's own operator pauses meanwhile, since both would act on every namespace. Afterwards the CRD
    is the generated one again and the suite's operator runs."""
    missing = real_node.missing_requirement()
    if missing is not None:
        pytest.skip(missing)
    devcluster.up(real_node=True)
    operator.stop()
    built = images.ensure_images(ROOT)
    devcluster.load_images([f"{name}:{VERSION}" for name in built])
    # once an earlier test's deploy/ went, the namespace places the operator on the real node
    devcluster.apply_namespaces([RELEASE_NAMESPACE], node_kinds.REAL)
    try:
        yield cluster
    finally:
        helm("uninstall", "disttrain", "--namespace", RELEASE_NAMESPACE, "--wait", env=cluster.env)
        cluster.kubectl("replace", "-f", str(ROOT / "crds" / "disttrain.io_disttrainjobs.yaml"))
        cluster.delete_namespace(RELEASE_NAMESPACE)
        operator.start()


def _chart_whose_crd_gained_a_field(folder: Path) -> Path:
    """The chart, one version on, whose DistTrainJob CRD has one more optional field in `spec`."""
    chart = folder / "disttrain"
    shutil.copytree(CHART, chart, symlinks=False)
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    (chart / "Chart.yaml").write_text(yaml.safe_dump({**metadata, "version": "0.1.1"}))
    crd_file = chart / "files" / "crds" / "disttrain.io_disttrainjobs.yaml"
    crd = yaml.safe_load(crd_file.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"][PROBE_FIELD] = {"type": "string", "description": "added by the chart's next version"}
    crd_file.write_text(yaml.safe_dump(crd))
    return chart


def _probe_served(cluster: Cluster, namespace: str) -> bool:
    """Whether the API server keeps the new field of a job (a server-side dry run, strict)."""
    job = MWMS.replace("name: mnist-mwms", "name: probe").replace("spec:\n", f"spec:\n  {PROBE_FIELD}: kept\n", 1)
    dry_run = ["--dry-run=server", "--validate=strict", "-o", "json", "-f", "-"]
    result = cluster.kubectl("create", "-n", namespace, *dry_run, stdin=job, check=False)
    return result.returncode == 0 and json.loads(result.stdout)["spec"].get(PROBE_FIELD) == "kept"


def test_install_upgrade_and_uninstall_keep_the_crds_and_the_jobs(
    helm_cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """README's `helm install`, with the images loaded into the real node rather than pulled from a registry.
    The CRDs exist already (the suite's own, applied by kubectl): `--take-ownership --force-conflicts`, and
    `--force-conflicts` on upgrades, as an admin moving from kustomize does."""
    install, label = readme.block("install-helm").splitlines()
    command = shlex.split(install)
    assert command[:4] == ["helm", "install", "disttrain", "charts/disttrain"]
    arguments = [argument.replace("image.registry=REGISTRY/", "image.registry=") for argument in command[4:]]
    local = ["--set", "image.pullPolicy=Never", "--force-conflicts", "--wait", "--timeout", "180s"]
    release = ["--namespace", RELEASE_NAMESPACE, *local]
    since = datetime.now(UTC).strftime(AUDIT_TIME)
    installed = helm("install", "disttrain", str(CHART), *arguments, *local, "--take-ownership", env=helm_cluster.env)
    assert installed.returncode == 0, installed.stderr
    assert shlex.split(label)[0] == "kubectl"
    helm_cluster.kubectl(*shlex.split(label)[1:])
    labels = (helm_cluster.get("namespace", RELEASE_NAMESPACE, "") or {})["metadata"].get("labels") or {}
    assert labels.get("pod-security.kubernetes.io/enforce") == "restricted"
    deployment = helm_cluster.get("deployment", "disttrain-operator", RELEASE_NAMESPACE)
    assert deployment is not None and deployment["status"].get("readyReplicas") == 2
    helm_cluster.apply(namespace, MWMS)
    before = running_pods(helm_cluster, namespace, "mnist-mwms", 4)
    assert not _probe_served(helm_cluster, namespace)

    upgraded = helm(
        "upgrade", "disttrain", str(_chart_whose_crd_gained_a_field(tmp_path)), *release, env=helm_cluster.env
    )
    assert upgraded.returncode == 0, upgraded.stderr
    wait_for("the new field served", lambda: _probe_served(helm_cluster, namespace), timeout=60)
    after = running_pods(helm_cluster, namespace, "mnist-mwms", 4)
    assert {name: pod["metadata"]["uid"] for name, pod in after.items()} == {
        name: pod["metadata"]["uid"] for name, pod in before.items()
    }
    assert helm_cluster.job(namespace, "mnist-mwms")["status"]["phase"] == "Running"

    account = f"system:serviceaccount:{RELEASE_NAMESPACE}:disttrain-operator"
    until = datetime.now(UTC).strftime(AUDIT_TIME)
    assert not refused_rights(devcluster.audit_logs(), account, since, until), "the chart's rules fall short"
    uninstalled = helm("uninstall", "disttrain", "--namespace", RELEASE_NAMESPACE, "--wait", env=helm_cluster.env)
    assert uninstalled.returncode == 0, uninstalled.stderr
    assert helm_cluster.get("deployment", "disttrain-operator", RELEASE_NAMESPACE) is None
    assert helm_cluster.get("crd", "disttrainjobs.disttrain.io", "") is not None
    assert helm_cluster.job(namespace, "mnist-mwms")["metadata"]["uid"]  # the job stays, with its CRD
    assert helm_cluster.get("clusterrole", "disttrain-edit", "") is not None  # and the roles users read it by
