"""The operator's own watches: each kind it reads is listed, then watched, by a thread per scope, and
each event becomes a small view at once; its body is dropped.

Pods are the bulk of what streams through the operator: a job's 7 pods bring some 30 events between
their creation and their deletion. Watched through kopf, each pod had a worker, a queue and a
memory of its own, and every event's decoded body stayed alive until a thread ran its handler: at
1,000 jobs that held most of the operator's 827 MB. Jobs, Services and PVCs went the same way
later: at 1,000 jobs kopf's handling of their events and its Event poster were 58 % of the
operator's CPU, and their cost per event grew with the number of jobs. Here a thread decodes a
line, keeps the few fields the reconcile reads and tells which job changed.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from disttrain_operator.core.types import JobKey
from disttrain_operator.runtime.kube import NotServedError, TransientApiError

logger = logging.getLogger(__name__)

PAGE = 200  # objects per page of a listing: a bounded body at a restart with thousands of pods
WATCH_SECONDS = 300  # the API server ends a watch after this long; the next one goes on from where it ended
RETRY_SECONDS = 1.0
UNSERVED_RETRY_SECONDS = 30.0  # a kind not served (Kueue not installed yet) is listed again this often
HTTP_GONE = 410
_GLOB = set("*?[!")

View = TypeVar("View")
Found = tuple[JobKey, str, View]  # an object's job, its uid and its view


class ListAndWatch(Protocol):
    """The API calls of a watch (`Kube` in the operator)."""

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]: ...
    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]: ...


@dataclass(frozen=True)
class Resource(Generic[View]):
    """A kind the operator watches: its API, which of its objects are the operator's (a label) and the
    view kept of each. `optional`: a kind the cluster may not serve (a CRD not installed), which then
    counts as listed and empty."""

    api: str  # "api/v1", or "apis/<group>/<version>"
    plural: str
    view: Callable[[dict[str, Any]], Found[View] | None]
    selector: str | None = None
    optional: bool = False

    def path(self, namespace: str | None) -> str:
        within = "" if namespace is None else f"/namespaces/{namespace}"
        return f"/{self.api}{within}/{self.plural}"

    def selection(self) -> dict[str, str]:
        """The query part that picks the operator's objects."""
        return {"labelSelector": self.selector} if self.selector else {}


class ObjectStore(Generic[View]):
    """The views of one kind's objects by job, shared by its watch threads (writers) and the reconciles."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[JobKey, dict[str, View]] = {}
        self._owner: dict[str, JobKey] = {}  # uid -> its job

    def views(self, key: JobKey) -> list[View]:
        with self._lock:
            return list(self._jobs.get(key, {}).values())

    def job_keys(self) -> list[JobKey]:
        with self._lock:
            return list(self._jobs)

    def put(self, key: JobKey, uid: str, view: View) -> bool:
        """Keep the object's new view; False when nothing the view holds changed."""
        with self._lock:
            if self._owner.get(uid, key) != key:  # relabelled to another job
                self._jobs.get(self._owner[uid], {}).pop(uid, None)
            views = self._jobs.setdefault(key, {})
            if uid in views and views[uid] == view:
                return False
            views[uid] = view
            self._owner[uid] = key
            return True

    def remove(self, uid: str) -> tuple[JobKey, View] | None:
        """Forget an object; its job's key and its last view, or None when it was not kept."""
        with self._lock:
            key = self._owner.pop(uid, None)
            if key is None:
                return None
            views = self._jobs.get(key, {})
            view = views.pop(uid)
            if not views:
                self._jobs.pop(key, None)
            return key, view

    def uids(self, within: Callable[[str], bool]) -> set[str]:
        """The uids of the objects kept in the namespaces `within` accepts."""
        with self._lock:
            return {uid for uid, key in self._owner.items() if within(key[0])}


@dataclass(frozen=True)
class Scope:
    """Where to watch: a namespace, or every namespace the patterns accept (kopf's --namespace globs)."""

    namespace: str | None
    patterns: tuple[str, ...] = ()

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


class Listings:
    """Set (`done`) once every watch has listed each of its scopes once: the reconciles wait for it, so a
    restarted operator knows every job and child that exists before it plans anything."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self._pending: set[str] = set()
        self._lock = threading.Lock()

    def expect(self, path: str) -> None:
        with self._lock:
            self._pending.add(path)

    def listed(self, path: str) -> None:
        with self._lock:
            self._pending.discard(path)
            if not self._pending:
                self.done.set()


class ObjectWatch(Generic[View]):
    """List, then watch from the listing's resourceVersion, for each scope; a relist when the API server
    has forgotten that version (410). `changed` hears of each object whose view changed (its job's key,
    its view, True) and of each one gone (its job's key, its last view, False)."""

    def __init__(
        self,
        kube: ListAndWatch,
        resource: Resource[View],
        store: ObjectStore[View],
        watched: Sequence[Scope],
        changed: Callable[[JobKey, View, bool], None],
        *,
        listings: Listings,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        """`retry_seconds`: the pause after a failed request, or a watch the API server ended at once."""
        self._kube = kube
        self._resource = resource
        self._store = store
        self._changed = changed
        self._listings = listings
        self._retry_seconds = retry_seconds
        self._stopped = threading.Event()
        self._unserved: set[str] = set()  # scopes whose last listing was refused, to log each change once
        self._threads = [
            threading.Thread(
                target=self._run, args=(scope,), name=f"disttrain-{resource.plural}-{scope.namespace or 'all'}"
            )
            for scope in watched
        ]
        for scope, thread in zip(watched, self._threads, strict=True):
            thread.daemon = True
            listings.expect(resource.path(scope.namespace))

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self, scope: Scope) -> None:
        path = self._resource.path(scope.namespace)
        version: str | None = None
        while not self._stopped.is_set():
            try:
                if version is None:
                    version = self._list(scope)
                if version is None:  # not served here
                    self._stopped.wait(UNSERVED_RETRY_SECONDS)
                    continue
                version = self._watch(scope, version)
            except TransientApiError as error:
                logger.warning("watch of %s: %s; again in %.0f s", path, error, self._retry_seconds)
                self._stopped.wait(self._retry_seconds)
            except Exception:  # a bug here must not stop the operator's sight of these objects for good
                logger.exception("watch of %s failed; listing again", path)
                version = None
                self._stopped.wait(self._retry_seconds)

    def _list(self, scope: Scope) -> str | None:
        """Replace what the store holds of the scope with a fresh listing; its resourceVersion, or None when
        the cluster does not serve an optional kind (then the store holds none of it)."""
        path = self._resource.path(scope.namespace)
        seen: set[str] = set()
        touched: list[tuple[JobKey, View, bool]] = []
        query = {"limit": str(PAGE), **self._resource.selection()}
        version: str | None = None
        try:
            while True:
                page = self._kube.list_page(path, query)
                self._keep(scope, page.get("items") or [], seen, touched)
                listing = page.get("metadata") or {}
                if not listing.get("continue"):
                    version = str(listing.get("resourceVersion", ""))
                    break
                query = {**query, "continue": str(listing["continue"])}
        except NotServedError as error:
            if not self._resource.optional:
                raise
            if path not in self._unserved:
                logger.info("%s not served (%s): none, listed again every %.0f s", path, error, UNSERVED_RETRY_SECONDS)
            self._unserved.add(path)
            seen.clear()
        else:
            if path in self._unserved:
                logger.info("%s served now", path)
            self._unserved.discard(path)
        for uid in self._store.uids(scope.accepts) - seen:
            removed = self._store.remove(uid)
            if removed is not None:
                touched.append((*removed, False))
        self._listings.listed(path)
        for key, view, present in touched:
            self._changed(key, view, present)
        return version

    def _keep(
        self, scope: Scope, items: list[dict[str, Any]], seen: set[str], touched: list[tuple[JobKey, View, bool]]
    ) -> None:
        """Put a page's objects in the store; their uids go to `seen`, those whose view changed to `touched`."""
        for item in items:
            found = self._found(scope, item)
            if found is None:
                continue
            seen.add(found[1])
            if self._store.put(*found):
                touched.append((found[0], found[2], True))

    def _found(self, scope: Scope, item: dict[str, Any]) -> Found[View] | None:
        found = self._resource.view(item)
        return found if found is not None and scope.accepts(found[0][0]) else None

    def _watch(self, scope: Scope, version: str) -> str | None:
        """Follow events until the API server ends the watch; the version to go on from, None to relist."""
        path = self._resource.path(scope.namespace)
        query = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
            **self._resource.selection(),
        }
        started = time.monotonic()
        for line in self._kube.stream_lines(path, query, read_timeout=WATCH_SECONDS + 30):
            if self._stopped.is_set():
                return version
            event = json.loads(line)
            kind, item = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if item.get("code") == HTTP_GONE:
                    return None
                raise TransientApiError(f"watch of {path}: {item.get('message')}")
            version = str((item.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._apply(scope, kind, item)
        if time.monotonic() - started < self._retry_seconds:  # ended at once: do not hammer the API server
            self._stopped.wait(self._retry_seconds)
        return version

    def _apply(self, scope: Scope, kind: str | None, item: dict[str, Any]) -> None:
        found = self._found(scope, item) if kind != "DELETED" else None
        if found is not None:
            if self._store.put(*found):
                self._changed(found[0], found[2], True)
            return
        removed = self._store.remove(str((item.get("metadata") or {}).get("uid")))  # deleted, or no longer ours
        if removed is not None:
            self._changed(*removed, False)
