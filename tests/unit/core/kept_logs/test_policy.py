"""What a job may keep of its logs, and the sweep of kept logs that outlive their job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_core.api.spec import MIN_LOG_BYTES
from disttrain_core.api.tenant_input import JOB_GONE_SINCE, LOG_TTL
from disttrain_core.kept_logs.names import JOB_UID_LABEL
from disttrain_core.kept_logs.policy import (
    KEPT_ATTEMPTS_PER_REPLICA,
    KEPT_BYTES_PER_JOB,
    gone_since_patch,
    kept_bytes_per_attempt,
    sweep,
)
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _kept(job_uid: str, *, gone_since: datetime | None = None, ttl: int = 60) -> dict[str, Any]:
    annotations = {LOG_TTL: str(ttl)}
    if gone_since is not None:
        annotations[JOB_GONE_SINCE] = gone_since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": f"log-{job_uid}", "labels": {JOB_UID_LABEL: job_uid}, "annotations": annotations}}


def test_an_attempt_keeps_what_the_job_asks_until_the_job_s_budget_shares_it_out() -> None:
    small = JobBuilder().counts({"Worker": 2}).spec(logs={"maxBytesPerAttempt": 65536}).job()
    assert kept_bytes_per_attempt(small) == 65536
    many = JobBuilder().counts({"Worker": 1000}).spec(logs={"maxBytesPerAttempt": 786432}).job()
    share = KEPT_BYTES_PER_JOB // (KEPT_ATTEMPTS_PER_REPLICA * 1000)
    assert kept_bytes_per_attempt(many) == max(MIN_LOG_BYTES, share) < 786432


def test_a_log_whose_job_went_is_marked_then_deleted_once_its_ttl_has_run_out() -> None:
    unmarked, marked = _kept("gone"), _kept("gone", gone_since=NOW - timedelta(seconds=59))
    due = _kept("gone", gone_since=NOW - timedelta(seconds=60))
    decided = sweep([unmarked, marked, due], job_uids=set(), now=NOW)
    assert (decided.mark, decided.unmark, decided.delete) == ([unmarked], [], [due])


def test_a_log_whose_job_is_back_is_unmarked_and_one_whose_job_runs_is_left() -> None:
    back, running = _kept("here", gone_since=NOW - timedelta(hours=1)), _kept("here")
    decided = sweep([back, running], job_uids={"here"}, now=NOW)
    assert (decided.mark, decided.unmark, decided.delete) == ([], [back], [])


def test_a_gone_since_written_ahead_counts_as_now_not_as_a_ttl_run_out() -> None:
    ahead = _kept("gone", gone_since=NOW + timedelta(days=365), ttl=0)
    assert sweep([ahead], job_uids=set(), now=NOW).delete == [ahead]  # a TTL of 0 from now: due now
    waiting = _kept("gone", gone_since=NOW + timedelta(days=365), ttl=1)
    assert sweep([waiting], job_uids=set(), now=NOW).delete == []


def test_the_mark_is_written_and_taken_off_as_one_annotation() -> None:
    assert gone_since_patch(NOW) == {"metadata": {"annotations": {JOB_GONE_SINCE: "2026-01-01T00:00:00Z"}}}
    assert gone_since_patch(None) == {"metadata": {"annotations": {JOB_GONE_SINCE: None}}}
