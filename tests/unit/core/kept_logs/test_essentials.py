"""What the kept logs hold of a pod or a kept log's ConfigMap stays small whatever a tenant wrote on it: the
first finalizers in their places, and the known annotations with values no longer than the operator's own."""

from __future__ import annotations

import json
from typing import Any

from disttrain_core.api.tenant_input import JOB_GONE_SINCE, LOG_MAX_BYTES
from disttrain_core.kept_logs.essentials import LONGEST_VALUE, MOST_ENTRIES, essentials
from disttrain_core.kept_logs.names import JOB_UID_LABEL, LEGACY_LOG_FINALIZER, OUTLIVES_JOB_LABEL
from disttrain_core.kept_logs.pods import held_by_legacy_finalizer, max_bytes, release_patch
from disttrain_core.kept_logs.policy import sweep
from support.planning import NOW

FINALIZERS = 24_000


def _tenants(kind: str, annotations: dict[str, str], finalizers: list[str]) -> dict[str, Any]:
    """An object as a tenant may write it: tens of thousands of finalizers beside the operator's annotations."""
    labels = {JOB_UID_LABEL: "gone-job", OUTLIVES_JOB_LABEL: "true"}
    metadata = {"name": "n", "uid": "u", "labels": labels, "annotations": annotations, "finalizers": finalizers}
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata}


def test_a_pod_s_first_finalizers_are_kept_in_their_places_and_no_more() -> None:
    finalizers = ["team/a", "team/b", LEGACY_LOG_FINALIZER, *(f"team/f{index}" for index in range(FINALIZERS))]
    pod = _tenants("Pod", {}, finalizers)
    slim = essentials(pod)
    assert slim["metadata"]["finalizers"] == finalizers[:MOST_ENTRIES]
    assert len(json.dumps(slim)) < 4096 < len(json.dumps(pod)) // 50
    assert held_by_legacy_finalizer(slim["metadata"])
    assert release_patch(slim) == release_patch(pod)  # its place among the first: the same patch as from the whole
    beyond = _tenants("Pod", {}, [*(f"team/f{index}" for index in range(MOST_ENTRIES)), LEGACY_LOG_FINALIZER])
    assert not held_by_legacy_finalizer(essentials(beyond)["metadata"])  # one the tenant buried holds its own pod


def test_a_known_annotation_longer_than_any_the_operator_writes_is_read_as_absent() -> None:
    padded = "9" * 250_000
    pod = _tenants("Pod", {LOG_MAX_BYTES: padded}, [])
    assert LOG_MAX_BYTES not in essentials(pod)["metadata"]["annotations"]
    assert max_bytes(essentials(pod)) == max_bytes(_tenants("Pod", {}, []))  # the default bound
    kept = {LOG_MAX_BYTES: "9" * LONGEST_VALUE}
    assert essentials(_tenants("Pod", kept, []))["metadata"]["annotations"] == kept


def test_a_kept_log_whose_job_gone_mark_a_tenant_padded_is_marked_again_by_the_sweep() -> None:
    """The sweep reads the padded mark as no mark, so the operator writes its own over it, as for one unmarked."""
    padded = _tenants("ConfigMap", {JOB_GONE_SINCE: "2026-01-01T00:00:00Z" + " " * 250_000}, [])
    slim = essentials(padded)
    assert len(json.dumps(slim)) < 4096
    assert sweep([slim], set(), NOW).mark == [slim]
