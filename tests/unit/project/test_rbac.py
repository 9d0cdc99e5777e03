"""The install modes' rights, read from deploy/: a namespaced install holds what a cluster-wide one holds,
only scoped to its namespace, so no feature answers 403 in one mode and works in the other."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from support.rbac_rights import bound_rights, documents, refused_rights, role_rights, used_rights
from support.repository import ROOT

NAMESPACED = ROOT / "deploy" / "namespaced"


def test_a_namespaced_operator_holds_every_right_of_a_cluster_wide_one() -> None:
    cluster_wide = role_rights(ROOT / "deploy" / "rbac.yaml", "ClusterRole", "Role")
    namespaced = set().union(
        *(role_rights(NAMESPACED / part / "rbac.yaml", "ClusterRole", "Role") for part in ("operator", "jobs"))
    )
    assert cluster_wide - namespaced == set()
    assert namespaced - cluster_wide == set()


def test_no_tenant_of_a_namespaced_install_can_become_the_operator() -> None:
    """The operator's account lives in a namespace of its own, apart from the jobs' namespace, where only a
    Role and its binding (to that account) are made: whoever may create pods there cannot run as it."""
    own = yaml.safe_load((NAMESPACED / "operator" / "kustomization.yaml").read_text())["namespace"]
    jobs = documents(NAMESPACED / "jobs" / "namespace.yaml")[0]["metadata"]["name"]
    assert own != jobs
    there = documents(NAMESPACED / "jobs" / "rbac.yaml")
    assert {(item["kind"], item["metadata"]["namespace"]) for item in there} == {("Role", jobs), ("RoleBinding", jobs)}
    subjects = [subject for item in there if item["kind"] == "RoleBinding" for subject in item["subjects"]]
    assert subjects == [{"kind": "ServiceAccount", "name": "disttrain-operator", "namespace": own}]
    accounts = [item for item in documents(NAMESPACED / "operator" / "rbac.yaml") if item["kind"] == "ServiceAccount"]
    assert [item["metadata"].get("namespace", own) for item in accounts] == [own]


def test_the_dashboard_account_may_only_review_tokens_and_name_the_namespaces() -> None:
    """The viewer role in the same file is for people to bind; the account itself reads no object's content."""
    granted = bound_rights(ROOT / "deploy" / "components" / "dashboard" / "rbac.yaml", "disttrain-dashboard")
    assert granted == {("authentication.k8s.io", "tokenreviews", "create"), ("", "namespaces", "list")}


def test_the_rights_one_account_used_and_was_refused_since_a_time(tmp_path: Path) -> None:
    def event(user: str, verb: str, at: str, decision: str = "allow", **target: str) -> str:
        return json.dumps(
            {
                "user": {"username": user},
                "verb": verb,
                "stageTimestamp": at,
                "annotations": {"authorization.k8s.io/decision": decision},
                **({"objectRef": target} if target else {}),
            }
        )

    operator = "system:serviceaccount:ns:disttrain-operator"
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                event(operator, "get", "2026-01-01T00:00:00.000001Z", resource="pods"),  # before
                event(operator, "get", "2026-01-01T00:00:01.000000Z", resource="pods", subresource="log"),
                event(operator, "patch", "2026-01-01T00:00:02.000000Z", apiGroup="disttrain.io", resource="x"),
                event(operator, "delete", "2026-01-01T00:00:03.000000Z", "forbid", resource="secrets"),
                event("system:serviceaccount:ns:other", "list", "2026-01-01T00:00:04.000000Z", resource="nodes"),
                event(operator, "get", "2026-01-01T00:00:05.000000Z"),  # /version: no resource
            ]
        )
    )
    assert used_rights([log], operator, "2026-01-01T00:00:01.000000Z") == {
        ("", "pods/log", "get"),
        ("disttrain.io", "x", "patch"),
    }
    assert refused_rights([log], operator, "2026-01-01T00:00:01.000000Z") == {("", "secrets", "delete")}
