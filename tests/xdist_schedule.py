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
