"""Fixtures for integration tests: the local control plane, the operator, a namespace per test."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from disttrain_dev import cluster as devcluster
from disttrain_dev import kueue, local_operator, real_node
from disttrain_dev.build import missing_binaries
from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster, operator_kubeconfig
from kueue_support import kueue_running
from operator_process import OperatorProcess
from pod_checks import GpuPool
from rbac_rights import AUDIT_TIME, Right, bound_rights, used_rights
from repository import ROOT
from xdist_schedule import BESIDE_THE_CLUSTER


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.integration)


DESELECTED: list[str] = []  # integration tests that `-m` or `--deselect` left out of this run
RAN_HERE: set[str] = set()  # the integration modules this process ran tests of (an xdist worker runs some)


def pytest_deselected(items: list[pytest.Item]) -> None:
    DESELECTED.extend(item.nodeid for item in items if "integration" in item.path.parts)


def pytest_runtest_setup(item: pytest.Item) -> None:
    RAN_HERE.add(item.path.relative_to(ROOT).as_posix())


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    """The local cluster, started (or reused) once; left running for the next run, as `up` is idempotent.

    With its real node wherever this machine can run one: adding it later would move the API server
    to the pod bridge under the feet of the operator that earlier tests started. The operator that README's
    quick start leaves running on this machine is stopped: each test runs the operator it proves."""
    if missing_binaries(cache_paths()) and shutil.which("go") is None:
        pytest.skip("the local control plane needs Go once to build its binaries, and none is on PATH")
    kubeconfig = devcluster.up(real_node=real_node.missing_requirement() is None)
    local_operator.stop(devcluster.state_dir())
    return Cluster(kubeconfig)


@pytest.fixture(scope="session")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    """The operator with its own ServiceAccount's token and deploy/'s RBAC: every test proves those rules."""
    folder = tmp_path_factory.mktemp("operator")
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


# The test ServiceAccounts and the RBAC files their tests bind to them.
HELD_ACCOUNTS = {
    "disttrain-operator": (ROOT / "deploy" / "rbac.yaml", ROOT / "overlays" / "serve-tfjobs" / "rbac.yaml"),
    "disttrain-dashboard": (ROOT / "deploy" / "components" / "dashboard" / "rbac.yaml",),
}


# The operator's rights that the code uses on paths this suite cannot take, and where each is proven instead.
UNEXERCISED: dict[Right, str] = {
    (
        "",
        "pods",
        "get",
    ): "the kept-log keeper reads a pod only to retry a release refused as stale: test_kept_log_keeper.py",
    ("scheduling.volcano.sh", "podgroups", "create"): "Volcano is not run here: the gang builders' golden files",
    ("scheduling.x-k8s.io", "podgroups", "create"): "the coscheduling plugin is not run here: the same golden files",
    ("scheduling.k8s.io", "priorityclasses", "get"): "a queued job whose pods name a PriorityClass: test_kueue.py",
    ("kubeflow.org", "tfjobs", "delete"): "a served TFJob's ttlSecondsAfterFinished, as test_lifecycle.py's job's",
}


@pytest.fixture(scope="session", autouse=True)
def rights_held_to_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a whole integration run on the local cluster that passed: every right the operator's and the
    dashboard's rules grant was used by them, as the API server's audit log shows (a right no request used is
    one to drop; one they lack is refused, which the operator fixture finds). It starts no cluster: the
    modules beside the cluster, which another worker runs, need none."""
    since = datetime.now(UTC).strftime(AUDIT_TIME)
    yield
    if not _whole_suite_passed(request.session):
        return
    unused: dict[str, set[Right]] = {}
    for account, files in HELD_ACCOUNTS.items():  # the API server writes each line before it answers
        granted = set().union(*(bound_rights(path, account) for path in files))
        assert set(UNEXERCISED) <= granted or account != "disttrain-operator", "UNEXERCISED names a right not held"
        user = f"system:serviceaccount:{OPERATOR_TEST_NAMESPACE}:{account}"
        unused[account] = granted - used_rights(devcluster.audit_logs(), user, since) - set(UNEXERCISED)
    assert not any(unused.values()), f"rights granted that no request of the suite used: {unused}"


def _whole_suite_passed(session: pytest.Session) -> bool:
    """Every integration module on the local cluster ran in this process, none of its tests deselected,
    skipped or failed. (CI deselects the tests its fast run passed before, none of them integration tests; a
    process-node scenario whose twin on the real node ran is skipped, as the twin's operator used its rights.)"""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    twins = {item.nodeid for item in session.items if item.get_closest_marker("real_node_twin")}
    skips = reporter.stats.get("skipped", []) if reporter is not None else []
    skipped = [report.nodeid for report in skips if report.nodeid not in twins]
    every = {path.relative_to(ROOT).as_posix() for path in Path(__file__).parent.glob("test_*.py")}
    on_the_cluster = every - BESIDE_THE_CLUSTER
    ran = RAN_HERE - BESIDE_THE_CLUSTER
    return ran == on_the_cluster and not DESELECTED and not session.testsfailed and not skipped


RESTRICTED = "pod-security.kubernetes.io/enforce=restricted"


def _namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace where the API server enforces the `restricted` Pod Security Standard on every pod."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, RESTRICTED)
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
def process_cluster(cluster: Cluster) -> Cluster:
    """The local cluster with its process node, whose pods run as real processes (root only)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the process node needs root and iproute2 (a network namespace per pod)")
    devcluster.up(process_node=True)
    return cluster


@pytest.fixture
def process_namespace(process_cluster: Cluster) -> Iterator[str]:
    """A namespace of the test's own whose pods run on the process node (deleted after it, unless it was)."""
    name = f"proc-{uuid.uuid4().hex[:8]}"
    process_cluster.kubectl("apply", "-f", "-", stdin=json.dumps(devcluster.process_namespace(name)))
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
