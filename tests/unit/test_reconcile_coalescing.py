"""One thread reconciles a job at a time; calls that arrive meanwhile leave only their newest view."""

from __future__ import annotations

import threading
from typing import Any

from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.reconciler import Reconciler
from support import EXAMPLES, load_one


class _SlowKube:
    """Creates block until released, so that calls pile up behind the first reconcile."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.created: list[str] = []

    def create(self, manifest: dict[str, Any]) -> bool:
        self.entered.set()
        self.release.wait(10)
        self.created.append(manifest["metadata"]["name"])
        return True

    def patch_job_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        pass


def test_calls_during_a_reconcile_collapse_into_the_newest() -> None:
    kube = _SlowKube()
    reconciler = Reconciler(kube, BuildSettings(), lambda *_, **__: None)  # type: ignore[arg-type]
    job = {**load_one(EXAMPLES[0]), "status": {}}
    job["metadata"] = {**job["metadata"], "namespace": "default", "uid": "u1", "generation": 1}
    runs: list[int] = []
    original = reconciler._reconcile_request

    def counted(uid: str, request: Any) -> None:
        runs.append(len(request.pods))
        original(uid, request)

    reconciler._reconcile_request = counted  # type: ignore[method-assign]
    first = threading.Thread(target=reconciler.reconcile, args=(job, [], []))
    first.start()
    assert kube.entered.wait(10)
    for _ in range(5):  # each returns at once: the first thread is still creating
        reconciler.reconcile(job, [], [])
    kube.release.set()
    first.join(10)
    assert runs == [0, 0]  # the first request, then only the newest of the five
