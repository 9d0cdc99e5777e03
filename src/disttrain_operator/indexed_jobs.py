"""The jobs as kopf's indexes hold them, read by the queue's threads.

kopf changes its indexes on its event loop while the reconciles read them on theirs. A read copies what
it needs (one job's entries, or the keys) and takes the copy again when kopf changed the dict during it,
which Python reports as a RuntimeError: copies take microseconds, so a retry is rare and short. Reading
through the event loop instead would queue every reconcile behind kopf's own event handling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from disttrain_core.types import Body, JobKey

Item = TypeVar("Item")
JobIndex = Mapping[JobKey, Iterable[Body]]  # a kopf.Index of job bodies by key, or a dict in tests


def copied(items: Iterable[Item]) -> list[Item]:
    """A list of what `items` holds now, though another thread may change it meanwhile."""
    while True:
        try:
            return list(items)
        except RuntimeError:  # the dict behind `items` changed size during the copy
            continue


class IndexedJobs:
    """Every kind's jobs of a key, oldest first, from one kopf index per kind."""

    def __init__(self, indexes: Sequence[JobIndex]) -> None:
        self._indexes = indexes

    def views(self, key: JobKey) -> list[Body]:
        """The jobs of this key, the oldest first: a DistTrainJob and, where TFJobs are served, a TFJob of the
        same name, which would name the same pods and Service; the one created first keeps them."""
        found = [body for index in self._indexes for body in copied(index.get(key, ()))]
        return sorted(found, key=lambda body: str(body["metadata"].get("creationTimestamp") or ""))

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
