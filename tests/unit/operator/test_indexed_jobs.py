"""The jobs as kopf's indexes hold them: one key's jobs of every kind, oldest first, and copies that survive
kopf changing an index meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from disttrain_core.types import Body, JobKey
from disttrain_operator.indexed_jobs import IndexedJobs, copied
from disttrain_operator.watched import PROJECTED
from support.fakes import RecordingApi

KEY: JobKey = ("team", "train")


def _job(kind: str, uid: str, created: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "train", "uid": uid, "creationTimestamp": created}}


def test_the_oldest_job_of_a_key_comes_first_whichever_kind_it_is() -> None:
    dist = {KEY: [_job("DistTrainJob", "d", "2026-01-01T00:00:02Z")]}
    served = {KEY: [_job("TFJob", "t", "2026-01-01T00:00:01Z")], ("team", "other"): [_job("TFJob", "o", "")]}
    jobs = IndexedJobs([dist, served], RecordingApi().read)
    assert [body["metadata"]["uid"] for body in jobs.views(KEY)] == ["t", "d"]
    assert jobs.uids(KEY) == {"t", "d"} and jobs.all_uids() == {"t", "d", "o"}
    assert jobs.job_keys() == {KEY, ("team", "other")}
    assert jobs.views(("team", "none")) == []


class _ChangedOnce:
    """An index's values as kopf's event loop changes them during the first read."""

    def __init__(self, bodies: list[Body]) -> None:
        self.bodies, self.reads = bodies, 0

    def __iter__(self) -> Iterator[Body]:
        self.reads += 1
        if self.reads == 1:
            raise RuntimeError("dictionary changed size during iteration")
        return iter(self.bodies)


def test_a_read_that_meets_a_change_is_taken_again() -> None:
    changing = _ChangedOnce([_job("DistTrainJob", "d", "")])
    assert [body["metadata"]["uid"] for body in copied(changing)] == ["d"]
    assert changing.reads == 2


def test_a_job_held_without_its_templates_is_read_whole_and_a_namesake_read_instead_is_none() -> None:
    held = {**_job("DistTrainJob", "d", ""), "apiVersion": "disttrain.io/v1alpha1", PROJECTED: True}
    held["metadata"]["namespace"] = "team"
    whole = {**held, "spec": {"replicaSpecs": {"Worker": {"template": {"spec": {"containers": []}}}}}}
    del whole[PROJECTED]
    found: dict[str, dict[str, Any]] = {"/apis/disttrain.io/v1alpha1/namespaces/team/disttrainjobs/train": whole}
    jobs = IndexedJobs([{KEY: [held]}], lambda path, params: found.get(path))
    read = jobs.whole(held)
    assert read is not None and read["spec"] == whole["spec"] and PROJECTED not in read
    unprojected = {**whole}
    assert jobs.whole(unprojected) is unprojected  # no read
    found[next(iter(found))] = {**whole, "metadata": {**whole["metadata"], "uid": "another"}}
    assert jobs.whole(held) is None
    found.clear()
    assert jobs.whole(held) is None
