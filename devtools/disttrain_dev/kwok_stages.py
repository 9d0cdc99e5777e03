"""kwok stages of the project's own, made from kwok's: volumes for the nodes the real node's provisioner
does not serve, and a pod deletion that cannot remove the pod's successor."""

from __future__ import annotations

from pathlib import Path

from disttrain_dev.real_node import NODE_NAME

_KWOK_CLASS = "self.spec.storageClassName == 'kwok-volume'"
_CLAIM_OFF_THE_REAL_NODE = (
    "self.spec.storageClassName == 'local-path' && has(self.metadata.annotations)"
    " && 'volume.kubernetes.io/selected-node' in self.metadata.annotations"
    f" && self.metadata.annotations['volume.kubernetes.io/selected-node'] != '{NODE_NAME}'"
)
_VOLUME_OFF_THE_REAL_NODE = (
    "self.spec.storageClassName == 'local-path' && has(self.metadata.annotations)"
    " && 'pv.kubernetes.io/provisioned-by' in self.metadata.annotations"
    " && self.metadata.annotations['pv.kubernetes.io/provisioned-by'] == 'kwok.x-k8s.io/volume'"
)


def write_local_path_stages(kwok_stages: Path, target: Path) -> None:
    """kwok's volume stages, again for claims of the default class `local-path` on the other nodes.

    With a real node, local-path is the default StorageClass; its provisioner serves the real node
    only, so these stages bind the claims of pods on the fake nodes and the process node (which maps
    each volume to a folder of its own) as kwok's own stages do for `kwok-volume`."""
    target.mkdir(parents=True, exist_ok=True)
    for name, condition in (
        ("pvc-provision", _CLAIM_OFF_THE_REAL_NODE),
        ("pvc-delete", _CLAIM_OFF_THE_REAL_NODE),
        ("pv-bind", _VOLUME_OFF_THE_REAL_NODE),
        ("pv-delete", _VOLUME_OFF_THE_REAL_NODE),
    ):
        text = (kwok_stages / f"{name}.yaml").read_text()
        if _KWOK_CLASS not in text:
            raise RuntimeError(f"kwok's stage {name} no longer selects its claims by class; update this copy")
        text = text.replace(_KWOK_CLASS, condition).replace(f"name: {name}\n", f"name: {name}-local-path\n", 1)
        (target / f"{name}-local-path.yaml").write_text(text)


# kwok's pod-delete stage deletes a pod being deleted by its name, with no uid precondition, some time after
# it saw the deletion, and again for each later event of the pod. The API server removes by itself a pod
# whose grace period is 0: one that ended, once its finalizers are gone, and one kwok's own deletion
# shortened to 0 (an event kwok sees too, after the pod is gone). Its controller may have made the pod's
# successor under the same name meanwhile: kwok then deleted the successor, which a kubelet, deleting by
# uid, never does. The stage here selects only the pods a kubelet still has to let go.
POD_DELETE = "pod-delete.yaml"
_DELETING = """    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
"""
_STILL_HELD = """    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Succeeded', 'Failed']
    - key: '.metadata.deletionGracePeriodSeconds > 0'
      operator: 'In'
      values: ['true']
"""


def write_pod_delete_stage(kwok_stages: Path, target: Path) -> None:
    """kwok's pod-delete stage, for pods that have not ended and whose grace period is not over."""
    text = (kwok_stages / POD_DELETE).read_text()
    if _DELETING not in text:
        raise RuntimeError(f"kwok's stage {POD_DELETE} no longer selects pods by deletionTimestamp; update this copy")
    target.mkdir(parents=True, exist_ok=True)
    (target / POD_DELETE).write_text(text.replace(_DELETING, _DELETING + _STILL_HELD, 1))
