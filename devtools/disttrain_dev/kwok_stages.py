"""kwok stages of the project's own, made from kwok's: volumes for the nodes the real node's provisioner
does not serve."""

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
        (target / f"{name}.yaml").write_text(text)
