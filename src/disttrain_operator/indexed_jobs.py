"""The jobs as kopf's indexes hold them, read by the queue's threads.

kopf changes its indexes on its event loop while the reconciles read them on theirs. A read copies what
it needs (one job's entries, or the keys) and takes the copy again when kopf changed the dict during it,
which Python reports as a RuntimeError: copies take microseconds, so a retry is rare and short. Reading
through the event loop instead would queue every reconcile behind kopf's own event handling. A job the
index holds without its templates (`watched.PROJECTED`) is read whole from the API server for its reconcile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from disttrain_core.types import Body, JobKey
from disttrain_operator.watched import PROJECTED, job_body, job_path

Item = TypeVar("Item")
JobIndex = Mapping[JobKey, Iterable[Body]]  # a kopf.Index of job bodies by key, or a dict in tests
Read = Callable[[str, dict[str, str]], dict[str, Any] | None]  # GET of one object, None where it is gone


def copied(items: Iterable[Item]) -> list[Item]:
    """A list of what `items` holds now, though another thread may change it meanwhile."""
    while True:
        try:
            return list(items)
        except RuntimeError:  # the dict behind `items` changed size during the copy
            continue


class IndexedJobs:
    """Every kind's jobs of a key, oldest first, from one kopf index per kind."""

    def __init__(self, indexes: Sequence[JobIndex], read: Read) -> None:
        self._indexes = indexes
        self._read = read

    def views(self, key: JobKey) -> list[Body]:
        """The jobs of this key, the oldest first: a DistTrainJob and, where TFJobs are served, a TFJob of the
        same name, which would name the same pods and Service; the one created first keeps them."""
        found = [body for index in self._indexes for body in copied(index.get(key, ()))]
        return sorted(found, key=lambda body: str(body["metadata"].get("creationTimestamp") or ""))

    def whole(self, body: Body) -> Body | None:
        """The job to reconcile: as the index holds it, or read whole where the index holds it without its
        templates; None where the job read is gone or another of its name (its own event follows)."""
        if not body.get(PROJECTED):
            return body
        found = self._read(job_path(body), {})
        if found is None or (found.get("metadata") or {}).get("uid") != body["metadata"].get("uid"):
            return None
        return job_body(found, whole=True)

    def job_keys(self) -> set[JobKey]:
        return {key for index in self._indexes for key in copied(index)}

    def uids(self, key: JobKey) -> set[str]:
        return {str(body["metadata"].get("uid")) for body in self.views(key)}

    def all_uids(self) -> set[str]:
        return {
            str(body["metadata"].get("uid"))
            for index in self._indexes
            for key in copied(index)
            for body in copied(index.get(key, ()))
        }
