"""Where each kind is served: from the models for the jobs, from discovery (read once) for the rest."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_kube.api_errors import RefusedError
from disttrain_kube.resources import Resources

CORE = {
    "resources": [
        {"name": "pods", "kind": "Pod", "namespaced": True},
        {"name": "pods/log", "kind": "Pod", "namespaced": True},
        {"name": "nodes", "kind": "Node", "namespaced": False},
    ]
}


class _Discovery:
    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.asked: list[str] = []

    def __call__(self, path: str) -> dict[str, Any] | None:
        self.asked.append(path)
        return self.documents.get(path)


def test_the_jobs_paths_come_from_the_models_without_asking() -> None:
    discovery = _Discovery({})
    resources = Resources(discovery)
    assert resources.collection("disttrain.io/v1alpha1", "DistTrainJob") == (
        "/apis/disttrain.io/v1alpha1/namespaces/{namespace}/disttrainjobs"
    )
    assert resources.collection("kubeflow.org/v1", "TFJob", every_namespace=True) == "/apis/kubeflow.org/v1/tfjobs"
    assert discovery.asked == []


def test_other_kinds_come_from_discovery_read_once_per_group_version() -> None:
    discovery = _Discovery({"/api/v1": CORE})
    resources = Resources(discovery)
    assert resources.collection("v1", "Pod") == "/api/v1/namespaces/{namespace}/pods"  # not pods/log
    assert resources.collection("v1", "Node") == "/api/v1/nodes"
    assert resources.collection("v1", "Pod") == "/api/v1/namespaces/{namespace}/pods"
    assert discovery.asked == ["/api/v1"]


def test_an_unserved_kind_is_refused_and_asked_again_next_time() -> None:
    """A CRD installed later is found then: neither an unserved group version nor a missing kind is kept."""
    discovery = _Discovery({"/api/v1": CORE})
    resources = Resources(discovery)
    with pytest.raises(RefusedError, match=r"does not serve kueue\.x-k8s\.io/v1beta1 \(so no Workload\)"):
        resources.collection("kueue.x-k8s.io/v1beta1", "Workload")
    with pytest.raises(RefusedError, match="does not serve v1 Lease"):
        resources.collection("v1", "Lease")
    workloads = {"resources": [{"name": "workloads", "kind": "Workload", "namespaced": True}]}
    discovery.documents["/apis/kueue.x-k8s.io/v1beta1"] = workloads
    assert resources.collection("kueue.x-k8s.io/v1beta1", "Workload").endswith("/workloads")
    assert discovery.asked == ["/apis/kueue.x-k8s.io/v1beta1", "/api/v1", "/apis/kueue.x-k8s.io/v1beta1"]
