"""How the test command's two pytest-xdist workers share the suites: the local cluster's on one, in order."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# The suites that share the local cluster, its nodes, the images and the Docker engine. The test command runs
# two pytest-xdist workers: one runs these, one after another in their order, as a single process would; the
# other takes every test that needs none of it (the trainer's processes, the Go tools, the unit tests).
CLUSTER_SUITES = frozenset({"integration", "e2e", "images"})

# Integration modules that start control planes of their own and touch nothing of the local cluster: the
# other worker runs each, beside the cluster's suites.
BESIDE_THE_CLUSTER = frozenset(
    {"tests/integration/test_kubernetes_versions.py", "tests/integration/test_kwok_benchmarks.py"}
)

# The cluster's modules that mostly wait (on kwok's fake nodes, the operator, the API server) rather than train: the
# cores were at most 55 % busy while each ran alone in a CI run (sampled every minute). The cluster's worker runs
# them first, while the other worker's TensorFlow takes the cores, and the modules that train after them, alone:
# there, the quick start's process-node test took 167 s beside that TensorFlow against 94 s alone.
WAITING_FIRST = frozenset(
    f"tests/integration/{name}.py"
    for name in (
        "test_helm_chart",
        "test_hostile_submissions",
        "test_hostile_tenants",
        "test_kept_logs",
        "test_lifecycle",
        "test_multikueue",
        "test_native_gangs",
        "test_operator",
        "test_pod_deletions",
        "test_process_node",
        "test_python_client_on_cluster",
        "test_readme_install",
        "test_real_kueue",
        "test_watches",
        "test_without_the_operator",
    )
)


def run_order(nodeid: str) -> int:
    """Where a test goes in a stable sort of the collection: the waiting modules before every other test."""
    return 0 if nodeid.split("::", maxsplit=1)[0] in WAITING_FIRST else 1


class ClusterSuitesOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no type hints
    """xdist's scheduling by scope, where the cluster's suites are one scope, each module beside the cluster
    one, and every other test its own. (xdist's `xdist_group` marks do not group under pytest 9, whose node
    ids xdist cannot rename.) xdist hands out the largest scope first, so the second largest, a module beside
    the cluster, starts on the other worker."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", maxsplit=1)[0]
        if module in BESIDE_THE_CLUSTER:
            return module
        return "cluster" if nodeid.split("/")[1] in CLUSTER_SUITES else nodeid
