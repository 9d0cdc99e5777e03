"""The real node's configuration, as written: addresses that keep the two nodes apart, the kubelet's
settings for these machines, names as containerd spells them, and kwok's stages made over for
`local-path` claims off the real node."""

from __future__ import annotations

import ipaddress
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from disttrain_dev import containerd, images, kwok_stages, node_build, pod_network, real_node

KWOK_STAGE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: {name}
spec:
  selector:
    matchExpressions:
    - cel:
        expression: >-
          self.spec.storageClassName == 'kwok-volume'
"""
STAGES = ("pvc-provision", "pvc-delete", "pv-bind", "pv-delete")


def test_the_cni_plugin_hands_out_only_the_upper_half_of_the_shared_bridge(tmp_path: Path) -> None:
    network: dict[str, Any] = real_node.cni_network(real_node.NodeFiles(tmp_path))
    bridge = network["plugins"][0]
    assert bridge["bridge"] == pod_network.BRIDGE
    (addresses,) = bridge["ipam"]["ranges"]
    (span,) = addresses
    first, last = ipaddress.ip_address(span["rangeStart"]), ipaddress.ip_address(span["rangeEnd"])
    assert first in pod_network.CNI_POOL and last in pod_network.CNI_POOL
    assert not pod_network.CNI_POOL.overlaps(pod_network.PROCESS_POOL)
    assert span["gateway"] == pod_network.GATEWAY and span["subnet"] == str(pod_network.NETWORK)


def test_the_kubelet_runs_on_cgroup_v1_with_its_own_address_and_the_cluster_dns(tmp_path: Path) -> None:
    config: dict[str, Any] = real_node.kubelet_config(real_node.NodeFiles(tmp_path), tmp_path / "ca.crt", 10250)
    assert config["failCgroupV1"] is False and config["cgroupDriver"] == "cgroupfs"
    assert config["address"] == pod_network.GATEWAY and config["clusterDNS"] == [real_node.DNS_ADDRESS]
    assert config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["registerWithTaints"] == [{"key": real_node.NODE_KIND_LABEL, "value": "real", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("disttrain/trainer:0.1.0", "docker.io/disttrain/trainer:0.1.0"),
        ("busybox:1", "docker.io/library/busybox:1"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ("localhost/own:x", "localhost/own:x"),
        ("localhost:5000/own:x", "localhost:5000/own:x"),
    ],
)
def test_docker_names_as_containerd_spells_them(tag: str, name: str) -> None:
    assert containerd.full_name(tag) == name


def test_kwok_stages_are_made_over_for_local_path_claims_off_the_real_node(tmp_path: Path) -> None:
    source, target = tmp_path / "kwok", tmp_path / "made"
    source.mkdir()
    for name in STAGES:
        (source / f"{name}.yaml").write_text(KWOK_STAGE.format(name=name))
    kwok_stages.write_local_path_stages(source, target)
    for name in STAGES:
        stage = yaml.safe_load((target / f"{name}-local-path.yaml").read_text())  # beside kwok's, not instead
        assert stage["metadata"]["name"] == f"{name}-local-path"
        (expression,) = [match["cel"]["expression"] for match in stage["spec"]["selector"]["matchExpressions"]]
        assert expression.startswith("self.spec.storageClassName == 'local-path'")
        assert ("!= 'real-node'" in expression) == name.startswith("pvc-")


def test_kwok_stages_that_no_longer_select_by_class_are_refused(tmp_path: Path) -> None:
    source = tmp_path / "kwok"
    source.mkdir()
    for name in STAGES:
        (source / f"{name}.yaml").write_text(KWOK_STAGE.format(name=name).replace("kwok-volume", "other"))
    with pytest.raises(RuntimeError, match="no longer selects its claims by class"):
        kwok_stages.write_local_path_stages(source, tmp_path / "made")


KWOK_POD_DELETE = """apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


def test_kwok_deletes_only_pods_the_api_server_does_not_remove_itself(tmp_path: Path) -> None:
    """Not a pod that ended, nor one whose grace period is 0 (kwok's own deletion, seen again)."""
    source, target = tmp_path / "kwok", tmp_path / "made"
    source.mkdir()
    (source / kwok_stages.POD_DELETE).write_text(KWOK_POD_DELETE)
    kwok_stages.write_pod_delete_stage(source, target)
    stage = yaml.safe_load((target / kwok_stages.POD_DELETE).read_text())  # in place of kwok's
    assert stage["metadata"]["name"] == "pod-delete" and stage["spec"]["next"] == {"delete": True}
    assert stage["spec"]["selector"]["matchExpressions"] == [
        {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
        {"key": ".status.phase", "operator": "NotIn", "values": ["Succeeded", "Failed"]},
        {"key": ".metadata.deletionGracePeriodSeconds > 0", "operator": "In", "values": ["true"]},
    ]
    (source / kwok_stages.POD_DELETE).write_text(KWOK_POD_DELETE.replace("deletionTimestamp", "deletion"))
    with pytest.raises(RuntimeError, match="no longer selects pods by deletionTimestamp"):
        kwok_stages.write_pod_delete_stage(source, target)


def test_a_machine_that_cannot_build_the_real_node_is_told_what_it_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """README's quick start takes the process node, saying why, where the real node cannot be built: a Docker
    engine alone is not enough the first time (gcc, pkg-config and libseccomp build runc; debootstrap the base)."""
    monkeypatch.setattr(node_build, "missing_node_binaries", lambda node: ["runc"])
    monkeypatch.setattr(images, "has_image", lambda tag: False)
    present = {"go", "gcc", "pkg-config", "debootstrap"}
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}" if tool in present else None)
    monkeypatch.setattr(real_node, "SECCOMP_HEADER", str(tmp_path / "seccomp.h"))
    assert real_node.build_requirement() == (
        "building the real node's runc once needs libseccomp (apt-get install libseccomp-dev)"
    )
    (tmp_path / "seccomp.h").write_text("")
    assert real_node.build_requirement() is None
    present.discard("gcc")
    assert "needs gcc (apt-get install gcc libc6-dev)" in str(real_node.build_requirement())
    monkeypatch.setattr(node_build, "missing_node_binaries", lambda node: [])  # built once already
    present.discard("debootstrap")
    assert "needs debootstrap" in str(real_node.build_requirement())
    monkeypatch.setattr(images, "has_image", lambda tag: True)
    assert real_node.build_requirement() is None
