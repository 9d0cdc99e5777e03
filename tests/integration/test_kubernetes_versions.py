"""Every supported Kubernetes minor older than the default, each on a control plane of its own beside the local
cluster (kwok's GPU nodes): every install mode applies and admits as on the default, the operator runs a job's
life, and Kubernetes' own gangs are built in the Workload API that minor serves and placed whole or not at all.
The whole suite runs on the default (newest) minor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from disttrain_core.api.kubernetes_version import SUPPORTED_KUBERNETES, minor_of
from disttrain_dev import versions
from disttrain_dev.cluster import crd_established
from disttrain_dev.polling import wait_for
from support.chart_support import MODES, kustomized, template
from support.job_checks import condition, job_where
from support.kube_cluster import Cluster, operator_kubeconfig
from support.multikueue_support import control_plane
from support.operator_process import OperatorProcess
from support.pod_checks import GpuPool, bound_pods, running_pods
from support.repository import ROOT

OLDER = SUPPORTED_KUBERNETES[:-1]
MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()


def _plane_name(release: str) -> str:
    major, minor = minor_of(release) or (0, 0)
    return f"k8s-{major}-{minor}"


@pytest.fixture(scope="module", params=OLDER)
def versioned(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A control plane of one older supported release, for every test of the module in turn."""
    with control_plane(_plane_name(request.param), kubernetes=request.param) as plane:
        assert _served_release(plane) == request.param
        yield plane


def _served_release(cluster: Cluster) -> str:
    return str(json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"])


def _namespace(cluster: Cluster, name: str) -> str:
    cluster.create_namespace(name, exist_ok=True)
    wait_for("the namespace's default ServiceAccount", lambda: cluster.get("serviceaccount", "default", name))
    return name


@pytest.fixture(scope="module")
def native_operator(versioned: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator as deploy/ grants it, set to Kubernetes' own gangs."""
    folder = tmp_path_factory.mktemp("operator")
    kubeconfig = operator_kubeconfig(versioned, folder)
    process = OperatorProcess(
        versioned,
        folder / "operator.log",
        kubeconfig=kubeconfig,
        environment={"DISTTRAIN_GANG_SCHEDULER": "kubernetes"},
    )
    process.start()
    yield process
    process.stop()


def _tried(cluster: Cluster, namespace: str, job: str) -> bool:
    """The scheduler found no place for one of the job's pods."""
    return any(
        c["type"] == "PodScheduled" and c["reason"] == "Unschedulable"
        for pod in cluster.job_pods(namespace, job).values()
        for c in pod["status"].get("conditions", [])
    )


def _established(cluster: Cluster, crd: str) -> bool:
    return crd_established(cluster.get("crd", crd, "default") or {})


def _apply(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=listed)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_install_mode_applies_and_admits_on_each_minor(versioned: Cluster, mode: str) -> None:
    """kustomize's and the chart's output, applied for real: the CRDs (their CEL rules compile within this
    minor's cost limits), the roles, the Deployment and the admission policy."""
    sources, namespace, values = MODES[mode]
    _apply(versioned, kustomized(versioned, sources))
    _apply(versioned, template({**values, "createNamespace": True}, namespace))
    for crd in ("disttrainjobs.disttrain.io", *(["tfjobs.kubeflow.org"] if mode == "serve TFJobs" else [])):
        wait_for(f"{crd} established", partial(_established, versioned, crd))
    jobs = _namespace(versioned, "jobs")
    good = versioned.kubectl("create", "--dry-run=server", "-n", jobs, "-f", "-", stdin=MWMS, check=False)
    assert good.returncode == 0, good.stderr
    too_large = MWMS.replace("backoffLimit: 3", "backoffLimit: 3\n    schedulingPolicy: {minAvailable: 9}")
    refused = versioned.kubectl("create", "--dry-run=server", "-n", jobs, "-f", "-", stdin=too_large, check=False)
    assert "minAvailable is more than the job's Chief, Worker and PS pods" in refused.stderr


def test_the_admission_policy_refuses_a_submitter_the_pods_they_may_not_create(versioned: Cluster) -> None:
    jobs = _namespace(versioned, "admission")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "submit", "namespace": jobs},
        "rules": [{"apiGroups": ["disttrain.io"], "resources": ["disttrainjobs"], "verbs": ["create"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "submit", "namespace": jobs},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "submit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
    }
    _apply(versioned, [role, binding])
    versioned.kubectl("apply", "--server-side", "-f", str(ROOT / "deploy" / "admission" / "policy.yaml"))

    def refused() -> str | None:
        answer = versioned.kubectl(
            "create", "--dry-run=server", "-n", jobs, "--as=alice", "-f", "-", stdin=MWMS, check=False
        )
        return answer.stderr if "denied request" in answer.stderr else None

    assert f"alice may not create pods in namespace {jobs}" in wait_for("the policy to refuse alice", refused, 30)


def test_a_job_runs_its_life_and_a_gang_is_built_in_the_workload_api_this_minor_serves(
    versioned: Cluster, native_operator: OperatorProcess
) -> None:
    """The same operator on each minor: pods with TF_CONFIG, Running, a failed worker restarting the job, then
    Succeeded; a gang of 3 on 2 free GPU slots gets no pod bound until a third slot appears."""
    jobs = _namespace(versioned, "life")
    versioned.apply(jobs, MWMS)
    before = running_pods(versioned, jobs, "mnist-mwms", 4)
    versioned.set_pod_status(jobs, "mnist-mwms-worker-2", "Failed", exit_code=130)
    job_where(versioned, jobs, "mnist-mwms", "restartCount 1", lambda j: j["status"].get("restartCount") == 1)

    def replaced() -> dict[str, dict[str, Any]] | None:
        pods = running_pods(versioned, jobs, "mnist-mwms", 4)
        return (
            pods if all(pods[name]["metadata"]["uid"] != before[name]["metadata"]["uid"] for name in before) else None
        )

    wait_for("every worker replaced", replaced, timeout=90)
    versioned.set_pod_status(jobs, "mnist-mwms-worker-0", "Succeeded", exit_code=0)  # worker 0 decides
    done = job_where(versioned, jobs, "mnist-mwms", "Succeeded", lambda j: j["status"].get("phase") == "Succeeded")
    assert condition(done, "Succeeded")["status"] == "True"  # type: ignore[index]

    workload_api = versions.control_plane_flags(_served_release(versioned)).workload_api
    pool = GpuPool(versioned)
    try:
        pool.add(gpus=1)
        pool.add(gpus=1)
        versioned.apply(jobs, json.dumps(pool.job("three", 3)))
        workload = wait_for(
            "the Workload", lambda: versioned.get(f"workloads.{workload_api.split('/')[0]}", "three", jobs)
        )
        assert workload["apiVersion"] == workload_api
        # 1.36 and 1.37 mark each held pod unschedulable; 1.35 the one that found no place, holding the others
        wait_for("the scheduler to try the gang", lambda: _tried(versioned, jobs, "three"), timeout=90)
        assert bound_pods(versioned, jobs, "three") == []
        pool.add(gpus=1)
        wait_for("all 3 bound together", lambda: len(bound_pods(versioned, jobs, "three")) == 3, timeout=120)
    finally:
        pool.remove()
