"""README's install on your own cluster: the overlay it writes builds deploy/ with the operator image
from the user's registry, with kubectl's own kustomize (the cluster's kubectl, of its version)."""

from __future__ import annotations

import shutil
import uuid

import yaml

from cluster_support import Cluster
from support import ROOT, readme_block


def test_readme_s_overlay_names_the_operator_image_of_your_registry(cluster: Cluster) -> None:
    commands = readme_block("install")
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
    images = {container["image"] for container in deployment["spec"]["template"]["spec"]["containers"]}
    assert images == {"REGISTRY/disttrain/operator:0.1.0"}
    assert {"CustomResourceDefinition", "ClusterRole", "ValidatingAdmissionPolicy"} <= {d["kind"] for d in built}
