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

# Modules whose control planes CI's background prebuild builds last (the older Kubernetes releases): handed out
# after every other scope, so that on a cold machine the worker runs the rest while that build finishes,
# rather than wait in their set-up.
AFTER_THE_REST = ("tests/integration/test_kubernetes_versions.py",)

# Integration modules that need kwok's nodes only (no process or real node, image or Docker engine; Kueue runs
# beside any plane as a process of its own, on ports it is given):
# they run on the suite's second control plane (`SECOND_PLANE` in tests/integration/conftest.py), with an
# operator of its own, one after another and beside the local cluster's suites. They mostly wait on the
# operator and the API server, so the cores the cluster's trainers want stay theirs.
ON_THE_SECOND_PLANE = frozenset(
    {
        "tests/integration/test_api_server_validation.py",
        "tests/integration/test_headlamp_plugin.py",
        "tests/integration/test_hostile_submissions.py",
        "tests/integration/test_kueue_tfjob_integration.py",
        "tests/integration/test_lifecycle.py",
        "tests/integration/test_native_gangs.py",
        "tests/integration/test_pod_deletions.py",
        "tests/integration/test_readme_install.py",
        "tests/integration/test_real_kueue.py",
        "tests/integration/test_tensorboard.py",
        "tests/integration/test_tfjob_examples.py",
        "tests/integration/test_watches.py",
    }
)


class ClusterSuitesOnOneWorker(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no type hints
    """xdist's scheduling by scope, where the cluster's suites are one scope, the second plane's modules
    another, each module beside the cluster one, and every other test its own. (xdist's `xdist_group` marks
    do not group under pytest 9, whose node ids xdist cannot rename.) xdist hands out the largest scopes first,
    one a worker: the cluster's and the second plane's, which hold the most tests, start side by side; the
    scopes `AFTER_THE_REST` names are handed out last."""

    def _assign_work_unit(self, node: object) -> None:
        for scope in AFTER_THE_REST:
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope)
        super()._assign_work_unit(node)

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", maxsplit=1)[0]
        if module in BESIDE_THE_CLUSTER:
            return module
        if module in ON_THE_SECOND_PLANE:
            return "second plane"
        return "cluster" if nodeid.split("/")[1] in CLUSTER_SUITES else nodeid
