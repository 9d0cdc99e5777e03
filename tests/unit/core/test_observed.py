"""Pod views: what the operator keeps of each pod."""

from __future__ import annotations

import json
from typing import Any

from disttrain_core.api.spec import ReplicaType
from disttrain_core.naming import REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from disttrain_core.observed import PodPhase, after_removal, pod_view
from disttrain_core.status_from_pods import describe_failure

LABELS = {"disttrain.io/job-name": "j", "disttrain.io/replica-type": "ps", "disttrain.io/replica-index": "1"}


def _pod(status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "j-ps-1", "uid": "u", "labels": LABELS, **metadata}, "status": status}


def test_running_and_ready() -> None:
    view = pod_view(_pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
    assert view is not None
    assert (view.replica_type, view.index, view.phase, view.ready, view.active) == (
        ReplicaType.PS,
        1,
        PodPhase.RUNNING,
        True,
        True,
    )


def test_failed_with_exit_code_of_the_tensorflow_container() -> None:
    status = {
        "phase": "Failed",
        "containerStatuses": [
            {"name": "sidecar", "restartCount": 1, "state": {"terminated": {"exitCode": 0}}},
            {
                "name": "tensorflow",
                "restartCount": 2,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            },
        ],
    }
    view = pod_view(_pod(status))
    assert view is not None
    assert (view.exit_code, view.reason, view.restarts, view.active) == (137, "OOMKilled", 3, False)


def test_evicted_pod_has_no_exit_code() -> None:
    view = pod_view(_pod({"phase": "Failed", "reason": "Evicted"}))
    assert view is not None
    assert (view.exit_code, view.reason) == (None, "Evicted")


def test_a_pod_taken_away_on_purpose_says_why() -> None:
    """The DisruptionTarget condition (True) names the disruption, bounded; so does the trainer's PREEMPTED
    exit; a False condition, another exit code or none at all is no disruption."""
    evicted = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    view = pod_view(_pod({"phase": "Running", "conditions": [evicted]}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert view is not None and view.disruption == "EvictionByEvictionAPI"
    assert describe_failure(view) == "j-ps-1 was taken away (EvictionByEvictionAPI)"
    long = {**evicted, "reason": "x" * 5000}
    view = pod_view(_pod({"phase": "Running", "conditions": [long]}))
    assert view is not None and view.disruption == "x" * 128
    terminated = {"name": "tensorflow", "state": {"terminated": {"exitCode": 140}}}
    view = pod_view(_pod({"phase": "Failed", "containerStatuses": [terminated]}))
    assert view is not None and view.disruption == "Preempted"
    for status in (
        {"phase": "Running", "conditions": [{**evicted, "status": "False"}]},
        {"phase": "Failed", "containerStatuses": [{"name": "tensorflow", "state": {"terminated": {"exitCode": 143}}}]},
        {"phase": "Running"},
    ):
        view = pod_view(_pod(status))
        assert view is not None and view.disruption is None


def test_the_true_conditions_a_failure_rule_matches_are_bounded() -> None:
    """Whoever writes a pod's status reaches only its job's rules, and only within the bounds."""
    conditions = [{"type": f"c{index}", "status": "True"} for index in range(100)]
    conditions += [{"type": "Ready", "status": "False"}, {"type": "y" * 5000, "status": "True"}]
    view = pod_view(_pod({"phase": "Running", "conditions": conditions[:3] + conditions[100:] + conditions[3:]}))
    assert view is not None
    assert {"c0", "c1", "c2", "y" * 317} <= view.conditions and "Ready" not in view.conditions
    assert len(view.conditions) == 32 - 1  # the first 32 entries, one of them False


def test_deleting_pod_is_not_active() -> None:
    view = pod_view(_pod({"phase": "Running"}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert view is not None
    assert view.deleting and not view.active


def test_what_remains_of_a_removed_pod_is_lost_and_runs_nothing_unless_it_succeeded() -> None:
    evicted = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    view = pod_view(_pod({"phase": "Running", "conditions": [evicted]}, deletionTimestamp="2026-01-01T00:00:00Z"))
    assert view is not None
    left = after_removal(view)
    assert left is not None
    assert (left.gone, left.deleting, left.released, left.lost, left.active) == (True, True, True, True, False)
    assert (left.name, left.uid, left.disruption) == (view.name, view.uid, "EvictionByEvictionAPI")
    unseen = pod_view(_pod({"phase": "Pending"}))  # a relisting found it gone: no deletion was seen
    assert unseen is not None and (left := after_removal(unseen)) is not None and left.lost
    succeeded = pod_view(_pod({"phase": "Succeeded"}))
    assert succeeded is not None and after_removal(succeeded) is None


def test_foreign_labels_are_ignored() -> None:
    assert pod_view({"metadata": {"name": "x", "labels": {"disttrain.io/job-name": "j"}}}) is None
    bad_index = {**LABELS, "disttrain.io/replica-index": "one"}
    assert pod_view({"metadata": {"name": "x", "labels": bad_index}}) is None


def _failed_with(message: str) -> dict[str, Any]:
    terminated = {"exitCode": 130, "reason": "Error", "message": message}
    return {
        "metadata": {
            "name": "job-worker-0",
            "uid": "u0",
            "labels": {REPLICA_TYPE_LABEL: "worker", REPLICA_INDEX_LABEL: "0"},
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "tensorflow", "state": {"terminated": terminated}}],
        },
    }


def test_a_failed_pod_says_why_in_the_words_of_its_container() -> None:
    unreachable = "peers unreachable after 60s: job-worker-1.job.ns.svc:2222"
    view = pod_view(_failed_with(json.dumps({"step": 40, "error": unreachable})))
    assert view is not None and view.message == unreachable
    assert describe_failure(view) == f"job-worker-0 failed with exit code 130 (Error): {unreachable}"
    plain = pod_view(_failed_with("out of disk"))
    assert plain is not None and plain.message == "out of disk"
    report = pod_view(_failed_with(json.dumps({"step": 40})))  # a report without an error says nothing more
    assert report is not None and report.message is None
    assert describe_failure(report) == "job-worker-0 failed with exit code 130 (Error)"


def test_a_trainer_says_it_diverged_in_its_termination_message_file_alone() -> None:
    said = json.dumps({"step": 60, "error": "the loss became nan at step 60", "diverged": True})
    view = pod_view(_failed_with(said))
    assert view is not None and view.diverged
    quiet = pod_view(_failed_with(json.dumps({"step": 60, "error": "nan"})))
    assert quiet is not None and not quiet.diverged
    for not_the_word in ('{"diverged": "true"}', '"diverged": true', "diverged"):  # no record, or not true
        plain = pod_view(_failed_with(not_the_word))
        assert plain is not None and not plain.diverged, not_the_word
    # the kubelet writes the log's tail there under FallbackToLogsOnError, and a program may print anything
    logged = _failed_with(said)
    logged["spec"] = {"containers": [{"name": "tensorflow", "terminationMessagePolicy": "FallbackToLogsOnError"}]}
    view = pod_view(logged)
    assert view is not None and not view.diverged and view.message == "the loss became nan at step 60"
