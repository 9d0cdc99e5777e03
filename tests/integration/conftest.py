"""Fixtures for integration tests: the local control plane or the suite's second plane, the operator, a
namespace per test."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from disttrain_dev import cluster as devcluster
from disttrain_dev import kueue, local_operator, real_node
from disttrain_dev.build import missing_binaries
from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from support import rights_audit
from support.kube_cluster import Cluster, admission_policy_installed, operator_kubeconfig
from support.kueue_support import kueue_running
from support.multikueue_support import control_plane
from support.operator_process import OperatorProcess
from support.pod_checks import GpuPool
from support.repository import ROOT
from support.xdist_schedule import ON_THE_SECOND_PLANE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


# The suite's second control plane (kwok's nodes only), for the modules that need no more
# (`xdist_schedule.ON_THE_SECOND_PLANE`): they run on it beside the local cluster's suites.
SECOND_PLANE = "suite"


def _skip_without_binaries() -> None:
    if missing_binaries(cache_paths()) and shutil.which("go") is None:
        pytest.skip("the local control plane needs Go once to build its binaries, and none is on PATH")


@pytest.fixture(scope="session")
def local_cluster() -> Cluster:
    """The local cluster, started (or reused) once; left running for the next run, as `up` is idempotent.

    With its real node wherever this machine can run one: adding it later would move the API server
    to the pod bridge under the feet of the operator that earlier tests started. The operator that README's
    quick start leaves running on this machine is stopped: each test runs the operator it proves."""
    _skip_without_binaries()
    kubeconfig = devcluster.up(real_node=real_node.missing_requirement() is None)
    local_operator.stop(devcluster.state_dir())
    rights_audit.plane_in_use(devcluster.state_dir())
    return Cluster(kubeconfig)


@pytest.fixture(scope="session")
def second_plane() -> Iterator[Cluster]:
    """The suite's second control plane, of the local cluster's release, until the session ends."""
    _skip_without_binaries()
    with control_plane(SECOND_PLANE) as plane:
        rights_audit.plane_in_use(devcluster.state_dir(SECOND_PLANE))
        yield plane
        rights_audit.read_plane(devcluster.state_dir(SECOND_PLANE))


def _on_the_second_plane(request: pytest.FixtureRequest) -> bool:
    return request.path.relative_to(ROOT).as_posix() in ON_THE_SECOND_PLANE


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """The plane the module runs on: the second plane for `ON_THE_SECOND_PLANE`'s modules, else the local
    cluster."""
    plane: Cluster = request.getfixturevalue("second_plane" if _on_the_second_plane(request) else "local_cluster")
    return plane


def _suite_operator(cluster: Cluster, folder: Path) -> Iterator[OperatorProcess]:
    """The operator with its own ServiceAccount's token and deploy/'s RBAC: every test proves those rules."""
    process = OperatorProcess(
        cluster,
        folder / "operator.log",
        kubeconfig=operator_kubeconfig(cluster, folder),
        environment={"DISTTRAIN_LOG_SWEEP_SECONDS": "1"},  # kept logs past their TTL go within seconds
    )
    process.start()
    yield process
    process.stop()
    lacking = process.rights_refused()
    assert not lacking, f"the API server refused the operator rights deploy/rbac.yaml lacks: {lacking[:5]}"


@pytest.fixture(scope="session")
def local_suite_operator(local_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    yield from _suite_operator(local_cluster, tmp_path_factory.mktemp("operator"))


@pytest.fixture(scope="session")
def second_plane_operator(second_plane: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    yield from _suite_operator(second_plane, tmp_path_factory.mktemp("operator"))


@pytest.fixture(scope="module")
def operator(request: pytest.FixtureRequest) -> OperatorProcess:
    """The suite's operator on the module's plane, started once a session per plane."""
    name = "second_plane_operator" if _on_the_second_plane(request) else "local_suite_operator"
    process: OperatorProcess = request.getfixturevalue(name)
    return process


RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def _namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace where the API server enforces the `restricted` Pod Security Standard on every pod."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    cluster.create_namespace(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": RESTRICTED}}
    )
    wait_for("the namespace's default ServiceAccount", lambda: cluster.get("serviceaccount", "default", name))
    yield name
    cluster.delete_namespace(name)  # the next test starts on a cluster whose GPUs are free again


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace of the test's own, deleted after it."""
    yield from _namespace(cluster)


@pytest.fixture(scope="module")
def dry_run_namespace(cluster: Cluster) -> Iterator[str]:
    """One namespace for a module whose tests only send server-side dry runs, which leave nothing behind."""
    yield from _namespace(cluster)


@pytest.fixture(scope="session")
def process_cluster(local_cluster: Cluster) -> Cluster:
    """The local cluster with its process node, whose pods run as real processes (root only)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the process node needs root and iproute2 (a network namespace per pod)")
    devcluster.up(process_node=True)
    return local_cluster


@pytest.fixture
def process_namespace(process_cluster: Cluster) -> Iterator[str]:
    """A namespace of the test's own whose pods run on the process node (deleted after it, unless it was)."""
    name = f"proc-{uuid.uuid4().hex[:8]}"
    process_cluster.create_namespace(devcluster.process_namespace(name))
    wait_for("the namespace's default ServiceAccount", lambda: process_cluster.get("serviceaccount", "default", name))
    yield name
    process_cluster.delete_namespace(name)


@pytest.fixture
def native_operator(cluster: Cluster, operator: OperatorProcess, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The operator set to Kubernetes' gangs; the suite's own pauses meanwhile, as both act on every namespace."""
    operator.stop()
    native = OperatorProcess(
        cluster,
        tmp_path / "operator.log",
        kubeconfig=operator_kubeconfig(cluster, tmp_path),
        environment={"DISTTRAIN_GANG_SCHEDULER": "kubernetes"},
    )
    native.start()
    yield native
    native.stop()
    operator.start()


@pytest.fixture
def pool(cluster: Cluster) -> Iterator[GpuPool]:
    created = GpuPool(cluster)
    yield created
    created.remove()


@pytest.fixture(scope="module")
def kueue_process(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Kueue, built from the source in shared/third_party, for the module that asks for it."""
    problem = kueue.missing_source()
    if problem:
        pytest.skip(problem)
    with kueue_running(cluster, tmp_path_factory.mktemp("kueue")):
        yield


@pytest.fixture
def admission_policy(cluster: Cluster) -> Iterator[None]:
    """deploy/admission on the module's plane, as an install has it, for the test's length."""
    with admission_policy_installed(cluster):
        yield
