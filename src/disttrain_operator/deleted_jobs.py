"""Jobs deleted and not yet forgotten. A watch thread only notes a deletion and names the job to the
queue; the queue's thread for that job forgets it, so what is remembered of a job (its status memory,
progress, wake-ups, failures) is never dropped beside a reconcile of the same job on another thread."""

from __future__ import annotations

import threading

from disttrain_core.types import JobKey


class DeletedJobs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gone: dict[JobKey, set[str]] = {}

    def note(self, key: JobKey, uid: str) -> None:
        with self._lock:
            self._gone.setdefault(key, set()).add(uid)

    def take(self, key: JobKey) -> set[str]:
        """The uids of the key's jobs deleted since the last call, noted no more."""
        with self._lock:
            return self._gone.pop(key, set())
