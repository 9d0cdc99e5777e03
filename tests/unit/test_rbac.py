"""The install modes' rights, read from deploy/: a namespaced install holds what a cluster-wide one holds,
only scoped to its namespace, so no feature answers 403 in one mode and works in the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from support import ROOT

Right = tuple[str, str, str]  # API group, resource, verb


def _documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def _rights(documents: list[dict[str, Any]], *kinds: str) -> set[Right]:
    return {
        (group, resource, verb)
        for document in documents
        if document["kind"] in kinds
        for rule in document.get("rules") or []
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_a_namespaced_operator_holds_every_right_of_a_cluster_wide_one() -> None:
    cluster_wide = _rights(_documents(ROOT / "deploy" / "rbac.yaml"), "ClusterRole", "Role")
    namespaced = _rights(_documents(ROOT / "deploy" / "namespaced" / "rbac.yaml"), "ClusterRole", "Role")
    assert cluster_wide - namespaced == set()
    assert namespaced - cluster_wide == set()
