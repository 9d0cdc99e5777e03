"""Where each kind is served: from the models for the jobs, from discovery (read once) for the rest."""

from __future__ import annotations

from typing import Any

import pytest

from disttrain_kube.api_errors import RefusedError
from disttrain_kube.cluster_facts import ClusterFacts, served_workload_api
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


def _scheduling(*kinds: str) -> dict[str, Any]:
    return {"resources": [{"name": f"{kind.lower()}s", "kind": kind, "namespaced": True} for kind in kinds]}


@pytest.mark.parametrize(
    ("documents", "served"),
    [
        ({"v1beta1": _scheduling("Workload", "PodGroup"), "v1alpha3": _scheduling("CompositePodGroup")}, "v1beta1"),
        ({"v1alpha2": _scheduling("Workload", "PodGroup")}, "v1alpha2"),
        ({"v1alpha1": _scheduling("Workload")}, "v1alpha1"),
        ({"v1alpha2": _scheduling("Workload")}, None),  # a version without its PodGroup cannot make a gang
        ({}, None),
    ],
)
def test_the_newest_workload_api_the_cluster_serves_is_the_one_gangs_are_built_in(
    documents: dict[str, dict[str, Any]], served: str | None
) -> None:
    discovery = _Discovery({f"/apis/scheduling.k8s.io/{version}": doc for version, doc in documents.items()})
    found = served_workload_api(Resources(discovery))
    assert (None if found is None else found.value) == (None if served is None else f"scheduling.k8s.io/{served}")


@pytest.mark.parametrize(
    ("version", "supported"), [("v1.37.2", True), ("v1.35.0+k3s1", True), ("v1.34.4", False), ("v1.38.0-beta.0", False)]
)
def test_a_cluster_outside_the_supported_minors_is_named_so(version: str, supported: bool) -> None:
    unsupported = ClusterFacts(version, None).unsupported
    assert (unsupported is None) is supported
    if unsupported is not None:
        assert (
            unsupported
            == f"Kubernetes {version} is outside the versions disttrain supports (v1.35.4, v1.36.3, v1.37.2)"
        )
