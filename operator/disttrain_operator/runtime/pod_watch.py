"""The operator's own watch of the pods it labelled: each event becomes a `PodView` at once, and its body is dropped.

Pods are the bulk of what streams through the operator: a job's 7 pods bring some 30 events between
their creation and their deletion. Watched through kopf, each pod had a worker, a queue and a
memory of its own, and every event's decoded body stayed alive until a thread ran its handler: at
1,000 jobs that held most of the operator's 827 MB, and the handling competed with the API server
for the CPU during a burst of new jobs. Here one thread per
watched scope decodes a line, keeps the few fields the planner reads and tells which job changed.
Jobs, Services, PVCs and Workloads, far fewer, stay with kopf.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from disttrain_operator.core.builders.naming import JOB_NAME_LABEL
from disttrain_operator.core.observed import PodView, pod_view
from disttrain_operator.core.types import JobKey
from disttrain_operator.runtime.kube import TransientApiError

logger = logging.getLogger(__name__)

PAGE = 200  # pods per page of a listing: a bounded body at a restart with thousands of pods
WATCH_SECONDS = 300  # the API server ends a watch after this long; the next one goes on from where it ended
RETRY_SECONDS = 1.0
HTTP_GONE = 410
_GLOB = set("*?[!")


class PodSource(Protocol):
    """The API calls of the watch (`Kube` in the operator)."""

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]: ...
    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]: ...


class PodStore:
    """The views of the operator's pods by job, shared by the watch threads (writers) and the reconciles."""

    def __init__(self) -> None:
        self.complete = threading.Event()  # set once every watched scope was listed: reconciles wait for it
        self._lock = threading.Lock()
        self._jobs: dict[JobKey, dict[str, PodView]] = {}
        self._owner: dict[str, JobKey] = {}  # pod uid -> its job

    def pods(self, key: JobKey) -> list[PodView]:
        with self._lock:
            return list(self._jobs.get(key, {}).values())

    def put(self, key: JobKey, view: PodView) -> bool:
        """Keep the pod's new view; False when nothing the planner reads changed."""
        uid = view.uid
        with self._lock:
            if self._owner.get(uid, key) != key:  # relabelled to another job
                self._jobs.get(self._owner[uid], {}).pop(uid, None)
            pods = self._jobs.setdefault(key, {})
            if pods.get(uid) == view:
                return False
            pods[uid] = view
            self._owner[uid] = key
            return True

    def remove(self, uid: str) -> JobKey | None:
        """Forget a pod; its job's key, or None when it was not kept."""
        with self._lock:
            key = self._owner.pop(uid, None)
            if key is not None:
                pods = self._jobs.get(key, {})
                pods.pop(uid, None)
                if not pods:
                    self._jobs.pop(key, None)
            return key

    def uids(self, within: Callable[[str], bool]) -> set[str]:
        """The uids of the pods kept in the namespaces `within` accepts."""
        with self._lock:
            return {uid for uid, key in self._owner.items() if within(key[0])}


@dataclass(frozen=True)
class Scope:
    """One watched path: a namespace, or every namespace the patterns accept (kopf's --namespace globs)."""

    namespace: str | None
    patterns: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return "/api/v1/pods" if self.namespace is None else f"/api/v1/namespaces/{self.namespace}/pods"

    def accepts(self, namespace: str) -> bool:
        if self.namespace is not None:
            return namespace == self.namespace
        included = [p for p in self.patterns if not p.startswith("!")]
        excluded = [p[1:] for p in self.patterns if p.startswith("!")]
        return (not included or any(fnmatch.fnmatchcase(namespace, p) for p in included)) and not any(
            fnmatch.fnmatchcase(namespace, p) for p in excluded
        )


def scopes(namespaces: Sequence[str]) -> list[Scope]:
    """What to watch for the operator's --namespace values: each name alone; every namespace when none is
    given, or when one is a pattern (then filtered by the patterns)."""
    if not namespaces:
        return [Scope(None)]
    if any(_GLOB & set(namespace) for namespace in namespaces):
        return [Scope(None, tuple(namespaces))]
    return [Scope(namespace) for namespace in dict.fromkeys(namespaces)]


def _key_and_view(pod: dict[str, Any]) -> tuple[JobKey, PodView] | None:
    metadata = pod.get("metadata") or {}
    job = (metadata.get("labels") or {}).get(JOB_NAME_LABEL)
    view = pod_view(pod)
    if job is None or view is None:
        return None
    return (str(metadata.get("namespace", "")), str(job)), view


class PodWatch:
    """List, then watch from the listing's resourceVersion, for each scope; a relist when the API server
    has forgotten that version (410). `changed` hears of each job whose pods changed. The store is
    complete once every scope has been listed: a restarted operator must see every pod before it plans.
    """

    def __init__(
        self,
        kube: PodSource,
        store: PodStore,
        watched: Sequence[Scope],
        changed: Callable[[JobKey], None],
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        """`retry_seconds`: the pause after a failed request, or a watch the API server ended at once."""
        self._kube = kube
        self._retry_seconds = retry_seconds
        self._store = store
        self._changed = changed
        self._stopped = threading.Event()
        self._unlisted = len(watched)
        self._guard = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(scope,), name=f"disttrain-pods-{scope.namespace or 'all'}")
            for scope in watched
        ]
        for thread in self._threads:
            thread.daemon = True

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self, scope: Scope) -> None:
        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    version = self._list(scope)
                version = self._watch(scope, version)
            except TransientApiError as error:
                logger.warning("pod watch of %s: %s; again in %.0f s", scope.path, error, self._retry_seconds)
                self._stopped.wait(self._retry_seconds)
            except Exception:  # a bug here must not stop the operator's sight of its pods for good
                logger.exception("pod watch of %s failed; listing again", scope.path)
                version = None
                self._stopped.wait(self._retry_seconds)

    def _list(self, scope: Scope) -> str:
        """Replace what the store holds of the scope with a fresh listing; its resourceVersion."""
        seen: set[str] = set()
        touched: set[JobKey] = set()
        query = {"labelSelector": JOB_NAME_LABEL, "limit": str(PAGE)}
        while True:
            page = self._kube.list_page(scope.path, query)
            for pod in page.get("items") or []:
                found = _key_and_view(pod)
                if found is None or not scope.accepts(found[0][0]):
                    continue
                seen.add(found[1].uid)
                if self._store.put(*found):
                    touched.add(found[0])
            listing = page.get("metadata") or {}
            if not listing.get("continue"):
                break
            query = {**query, "continue": str(listing["continue"])}
        for uid in self._store.uids(scope.accepts) - seen:
            key = self._store.remove(uid)
            if key is not None:
                touched.add(key)
        self._listed()
        for key in touched:
            self._changed(key)
        return str(listing.get("resourceVersion", ""))

    def _listed(self) -> None:
        with self._guard:
            self._unlisted -= 1
            if self._unlisted <= 0:
                self._store.complete.set()

    def _watch(self, scope: Scope, version: str) -> str | None:
        """Follow events until the API server ends the watch; the version to go on from, None to relist."""
        query = {
            "labelSelector": JOB_NAME_LABEL,
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        started = time.monotonic()
        for line in self._kube.stream_lines(scope.path, query, read_timeout=WATCH_SECONDS + 30):
            if self._stopped.is_set():
                return version
            event = json.loads(line)
            kind, pod = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if pod.get("code") == HTTP_GONE:
                    return None
                raise TransientApiError(f"watch of {scope.path}: {pod.get('message')}")
            version = str((pod.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._apply(scope, kind, pod)
        if time.monotonic() - started < self._retry_seconds:  # ended at once: do not hammer the API server
            self._stopped.wait(self._retry_seconds)
        return version

    def _apply(self, scope: Scope, kind: str | None, pod: dict[str, Any]) -> None:
        uid = str((pod.get("metadata") or {}).get("uid"))
        found = _key_and_view(pod) if kind != "DELETED" else None
        if found is not None and scope.accepts(found[0][0]):
            if self._store.put(*found):
                self._changed(found[0])
            return
        key = self._store.remove(uid)  # deleted, or no longer labelled as a task of ours
        if key is not None:
            self._changed(key)
