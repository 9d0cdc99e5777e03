"""The tests' reads take a kind by each name kubectl takes, and choose among groups as kubectl does."""

from __future__ import annotations

from typing import Any

from support.kube_cluster import KubectlKind, kubectl_names

PODS = {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"]}
EVENTS = {"name": "events", "singularName": "event", "namespaced": True, "kind": "Event", "shortNames": ["ev"]}
NODES = {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node", "shortNames": ["no"]}
POD_LOGS = {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod"}


def _resource(name: str, kind: str, *, singular: str = "") -> dict[str, Any]:
    return {"name": name, "singularName": singular, "namespaced": True, "kind": kind}


SERVED = [
    ("", "v1", "/api/v1", [PODS, POD_LOGS, EVENTS, NODES]),
    ("events.k8s.io", "v1", "/apis/events.k8s.io/v1", [{**EVENTS, "shortNames": ["ev"]}]),
    ("scheduling.k8s.io", "v1beta1", "/apis/scheduling.k8s.io/v1beta1", [_resource("workloads", "Workload")]),
    (
        "kueue.x-k8s.io",
        "v1beta2",
        "/apis/kueue.x-k8s.io/v1beta2",
        [_resource("workloads", "Workload", singular="workload")],
    ),
]


def test_every_name_kubectl_takes_reaches_the_kind_and_a_cluster_scoped_one_needs_no_namespace() -> None:
    names = kubectl_names(SERVED)
    pods = KubectlKind("/api/v1/namespaces/{namespace}/pods", "Pod")
    assert names["pods"] == names["pod"] == names["po"] == pods
    assert names["no"] == KubectlKind("/api/v1/nodes", "Node")
    assert "pods/log" not in names  # a subresource is no kind


def test_the_core_group_and_then_discovery_s_order_win_a_name_and_a_group_chooses_one() -> None:
    names = kubectl_names(SERVED)
    assert names["events"].collection == "/api/v1/namespaces/{namespace}/events"
    assert names["workloads"].collection == "/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/workloads"
    kueue = "/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
    assert names["workloads.kueue.x-k8s.io"].collection == names["workload.v1beta2.kueue.x-k8s.io"].collection == kueue
