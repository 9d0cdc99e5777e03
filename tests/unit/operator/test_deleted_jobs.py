"""Jobs deleted and not yet forgotten: noted by a watch thread, taken once by the job's queue thread."""

from __future__ import annotations

from disttrain_operator.deleted_jobs import DeletedJobs


def test_each_deletion_is_taken_once_and_only_for_its_key() -> None:
    deleted = DeletedJobs()
    deleted.note(("team", "a"), "u1")
    deleted.note(("team", "a"), "u2")  # the job made again under its name, and deleted again
    deleted.note(("team", "b"), "u3")
    assert deleted.take(("team", "a")) == {"u1", "u2"}
    assert deleted.take(("team", "a")) == set()
    assert deleted.take(("team", "b")) == {"u3"}
