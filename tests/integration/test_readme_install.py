"""README's install on your own cluster: the overlay it writes builds deploy/ with the operator image
from the user's registry and names the trainer image pushed beside it, with kubectl's own kustomize (the
cluster's kubectl, of its version); and what each install mode's uninstall removes and leaves."""

from __future__ import annotations

import shutil
import uuid
from typing import Any

import pytest
import yaml

from disttrain_core.api.crd import KEPT_ON_UNINSTALL
from disttrain_dev import readme
from support.kube_cluster import Cluster
from support.repository import ROOT


def test_readme_s_overlay_names_the_operator_image_of_your_registry(cluster: Cluster) -> None:
    commands = readme.block("install")
    overlay = commands.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    assert "kubectl apply --server-side -k overlays/mine/" in commands
    folder = ROOT / "overlays" / f"readme-{uuid.uuid4().hex[:8]}"  # beside overlays/mine, at the same depth
    folder.mkdir()
    try:
        (folder / "kustomization.yaml").write_text(overlay + "\n")
        built = list(yaml.safe_load_all(cluster.kubectl("kustomize", str(folder)).stdout))
    finally:
        shutil.rmtree(folder)
    (deployment,) = [d for d in built if d["kind"] == "Deployment" and d["metadata"]["name"] == "disttrain-operator"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "REGISTRY/disttrain/operator:0.1.0"
    env = {entry["name"]: entry.get("value") for entry in container["env"]}
    assert env["DISTTRAIN_TRAINER_IMAGE"] == "REGISTRY/disttrain/trainer:0.1.0"  # what jobs without one run
    assert {"POD_NAME", "POD_ID", "POD_NAMESPACE"} <= set(env)  # merged by name, the rest kept
    assert {"CustomResourceDefinition", "ClusterRole", "ValidatingAdmissionPolicy"} <= {d["kind"] for d in built}


INSTALL_MODES = ["deploy", "deploy/namespaced", "overlays/serve-tfjobs", "overlays/dashboard", "overlays/local-images"]


@pytest.mark.parametrize("mode", INSTALL_MODES)
def test_each_install_mode_s_uninstall_leaves_the_users_jobs_and_holds_nothing(cluster: Cluster, mode: str) -> None:
    """docs/admins.md's uninstall (`kubectl delete -k MODE -l 'disttrain.io/kept-on-uninstall!=true'`; kubectl
    picks the files' objects by their labels): the operator and everything it holds goes; the CRDs (with the
    jobs and kept logs), the roles users read them by, and a namespace the jobs run in stay; and no object
    the install makes holds anything with a finalizer."""
    built = [item for item in yaml.safe_load_all(cluster.kubectl("kustomize", str(ROOT / mode)).stdout) if item]
    kept = {(item["kind"], item["metadata"]["name"]) for item in built if _kept(item)}
    removed = {(item["kind"], item["metadata"]["name"]) for item in built if not _kept(item)}
    crds = {key for key in kept | removed if key[0] == "CustomResourceDefinition"}
    assert crds and crds <= kept
    assert {("ClusterRole", "disttrain-edit"), ("ClusterRole", "disttrain-view")} <= kept
    assert ("Deployment", "disttrain-operator") in removed and ("ServiceAccount", "disttrain-operator") in removed
    jobs_namespace = {("Namespace", "disttrain")} if mode == "deploy/namespaced" else set()
    assert kept == crds | {("ClusterRole", "disttrain-edit"), ("ClusterRole", "disttrain-view")} | jobs_namespace
    assert not [item for item in built if item["metadata"].get("finalizers")]


def _kept(item: dict[str, Any]) -> bool:
    return (item["metadata"].get("labels") or {}).get(KEPT_ON_UNINSTALL) == "true"
