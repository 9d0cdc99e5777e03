"""The test command's schedule, as xdist's scheduler hands it out to two workers."""

from __future__ import annotations

from types import SimpleNamespace

from support.xdist_schedule import ClusterSuitesOnOneWorker

CLUSTER = [
    "tests/e2e/test_e2e.py::test_the_example",
    "tests/images/test_built_images.py::test_an_image",
    "tests/integration/test_faults.py::test_a_job",
]
SECOND_PLANE = [
    "tests/integration/test_lifecycle.py::test_a_life",
    "tests/integration/test_watches.py::test_a_watch",
    "tests/integration/test_watches.py::test_another_watch",
]
BESIDE = [
    "tests/integration/test_kubernetes_versions.py::test_a_minor[v1.35]",
    "tests/integration/test_kubernetes_versions.py::test_a_minor[v1.36]",
]
OTHERS = [
    "tests/trainer_processes/test_trainer.py::test_a_run",
    "tests/unit/core/test_backoff.py::test_a_delay",
]


class _Worker:
    """What the scheduler asks of a worker: its name, take tests by their index in the collection, shut down."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduled(collection: list[str]) -> tuple[ClusterSuitesOnOneWorker, _Worker, _Worker]:
    """The scheduler with two workers that collected `collection`, once it handed out their first scopes."""
    options = {"tx": ["2*popen"]}
    config = SimpleNamespace(getvalue=options.__getitem__, option=SimpleNamespace(loadscopereorder=True))
    scheduler = ClusterSuitesOnOneWorker(config)
    first, second = _Worker("gw0"), _Worker("gw1")
    for worker in (first, second):
        scheduler.add_node(worker)
    for worker in (first, second):
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    return scheduler, first, second


def test_the_cluster_s_suites_go_to_one_worker_and_the_second_plane_s_start_on_the_other() -> None:
    collection = [CLUSTER[0], *SECOND_PLANE[:1], CLUSTER[1], *BESIDE[:1], CLUSTER[2], *SECOND_PLANE[1:], *BESIDE[1:]]
    collection += OTHERS
    cluster = [*CLUSTER, "tests/integration/test_faults.py::test_b", "tests/integration/test_faults.py::test_c"]
    collection += cluster[3:]
    _, first, second = _scheduled(collection)
    assert [collection[index] for index in first.sent] == cluster  # in their order, nothing else while they run
    assert [collection[index] for index in second.sent][: len(SECOND_PLANE)] == SECOND_PLANE  # then the rest


def test_the_older_releases_planes_come_after_every_other_scope() -> None:
    """CI's prebuild builds their control planes last: the worker takes the rest first."""
    collection = [*CLUSTER, *BESIDE, *SECOND_PLANE, *OTHERS]
    scheduler, _, second = _scheduled(collection)
    done = 0
    while done < len(second.sent):  # the second worker finishes each test it was sent, and is sent more
        scheduler.mark_test_complete(second, second.sent[done], 0)
        done += 1
    assert [collection[index] for index in second.sent] == [*SECOND_PLANE, *OTHERS, *BESIDE]
