"""The names a kept log goes by: the container whose log it is, the run it is in a pod that restarts in place,
and its ConfigMap's name."""

from __future__ import annotations

from typing import Any

from disttrain_core.api.spec import MAX_ATTEMPT
from disttrain_core.api.tenant_input import RUNS_COUNTED
from disttrain_core.kept_logs.names import kept_log_name, logged_container, run_index


def _pod(restarts: object, *, in_place: bool = True, containers: list[str] | None = None) -> dict[str, Any]:
    names = containers or ["tensorflow"]
    annotations = {RUNS_COUNTED: "0"} if in_place else {}
    return {
        "metadata": {"name": "job-worker-0", "uid": "0123456789ab", "annotations": annotations},
        "spec": {"containers": [{"name": name} for name in names]},
        "status": {"containerStatuses": [{"name": names[0], "restartCount": restarts}]},
    }


def test_the_trainer_container_s_log_is_kept_and_the_first_container_s_without_one() -> None:
    assert logged_container(_pod(0, containers=["sidecar", "tensorflow"])) == "tensorflow"
    assert logged_container(_pod(0, containers=["main", "sidecar"])) == "main"
    assert logged_container({}) == "tensorflow"


def test_each_run_in_place_is_a_log_of_its_own_and_another_pod_s_runs_are_one() -> None:
    assert [run_index(_pod(n)) for n in (0, 2)] == [0, 2]
    assert run_index(_pod(2, in_place=False)) == 0
    assert run_index(_pod(MAX_ATTEMPT + 1)) == run_index(_pod(-1)) == run_index(_pod("2")) == 0  # forged counts


def test_a_kept_log_is_named_by_its_pod_its_uid_and_its_run() -> None:
    assert kept_log_name(_pod(0)) == "job-worker-0-log-01234567"
    assert kept_log_name(_pod(3)) == "job-worker-0-log-01234567-run3"
