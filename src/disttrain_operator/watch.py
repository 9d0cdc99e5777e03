"""The operator's own watches of its jobs' children (kopf watches the jobs): each kind is listed, then
watched, by a thread per scope, and each event becomes a small view at once; its body is dropped.

Pods are the bulk of what streams through the operator, and each event watched through kopf kept a
worker and its whole body alive; here a thread decodes a line, keeps the few fields the reconcile
reads and tells which job changed (docs/architecture.md has the figures that decided it)."""

from __future__ import annotations

import fnmatch
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from disttrain_core.backoff import Backoff
from disttrain_core.types import JobKey
from disttrain_kube.api_errors import NotServedError, ResourceExpiredError, TransientApiError
from disttrain_kube.rest import WATCH_SILENCE_MARGIN, watch_events
from disttrain_operator import metrics
from disttrain_operator.workers import ended_threads

logger = logging.getLogger(__name__)

PAGE = 25  # objects per page of a listing: a tenant may make each about a megabyte, so a page is bounded by count
# The API server ends a watch after this long (its bookmark first), and the next goes on from where it
# ended; a stream silent for WATCH_SILENCE_MARGIN past that is taken for a dead connection, as kopf's
# client timeout does, so a connection that died without a word costs about 70 s rather than forever.
WATCH_SECONDS = 60
# client-go's reflector: 0.8 s after a failure, doubling to 30 s, with up to as much again at random.
RECONNECT_BACKOFF = Backoff(first=0.8, longest=30, jitter=1.0)
ENDED_AT_ONCE_SECONDS = 1.0  # a watch ended this soon without a word counts as a failure
UNSERVED_RETRY_SECONDS = 30.0  # a kind not served (Kueue not installed yet) is listed again this often
_GLOB = set("*?[!")

View = TypeVar("View")
Found = tuple[JobKey, str, View]  # an object's job, its uid and its view


class ListAndWatch(Protocol):
    """The API calls of a watch (`Kube` in the operator)."""

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]: ...
    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]: ...


@dataclass(frozen=True)
class WatchedResource(Generic[View]):
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
    """The views of one kind's objects by job, shared by its watch threads (writers) and the reconciles.

    `after_removal`: what stays among its job's views of an object deleted from the API (None: nothing), until
    `bury` lets it go. A pod deleted and removed at once could otherwise be gone before a reconcile saw it
    go (`disttrain_core.observed.after_removal`)."""

    def __init__(self, after_removal: Callable[[View], View | None] | None = None) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[JobKey, dict[str, View]] = {}
        self._owner: dict[str, JobKey] = {}  # uid -> its job, for the objects in the API
        self._after_removal = after_removal
        self._buried: dict[JobKey, set[str]] = {}  # the uids of the remains kept, by job

    def views(self, key: JobKey) -> list[View]:
        with self._lock:
            return list(self._jobs.get(key, {}).values())

    def job_keys(self) -> list[JobKey]:
        with self._lock:
            return list(self._jobs)

    def put(self, key: JobKey, uid: str, view: View) -> bool:
        """Keep the object's new view; False when nothing the view compares changed (it is kept all the
        same: a field left out of the comparison, such as the version a deletion names, stays current)."""
        with self._lock:
            if self._owner.get(uid, key) != key:  # relabelled to another job
                self._drop(self._owner[uid], uid)
            views = self._jobs.setdefault(key, {})
            changed = views.get(uid) != view
            views[uid] = view
            self._owner[uid] = key
            return changed

    def remove(self, uid: str, *, deleted: bool = False, last: View | None = None) -> tuple[JobKey, View] | None:
        """Forget an object; its job's key and its last view, or None when it was not kept. One `deleted` from
        the API leaves its remains, made from `last` (its view as the deletion showed it) or else from the view
        kept; then they are what is returned."""
        with self._lock:
            key = self._owner.pop(uid, None)
            if key is None:
                return None
            view = self._drop(key, uid)
            left = self._after_removal(last if last is not None else view) if deleted and self._after_removal else None
            if left is None:
                return key, view
            self._jobs.setdefault(key, {})[uid] = left
            self._buried.setdefault(key, set()).add(uid)
            return key, left

    def bury(self, key: JobKey, uids: AbstractSet[str] | None = None) -> None:
        """Let go of the remains of the job's objects in `uids` (every one when None)."""
        with self._lock:
            kept = self._buried.get(key)
            if not kept:  # the common case, after every reconcile
                return
            for uid in [uid for uid in kept if uids is None or uid in uids]:
                kept.discard(uid)
                self._drop(key, uid)
            if not kept:
                self._buried.pop(key, None)

    def _drop(self, key: JobKey, uid: str) -> View:
        views = self._jobs[key]
        view = views.pop(uid)
        if not views:
            self._jobs.pop(key)
        return view

    def uids(self, within: Callable[[str], bool]) -> set[str]:
        """The uids of the objects kept in the namespaces `within` accepts (remains are no longer in the API)."""
        with self._lock:
            return {uid for uid, key in self._owner.items() if within(key[0])}


@dataclass(frozen=True)
class WatchScope:
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


def scopes(namespaces: Sequence[str]) -> list[WatchScope]:
    """What to watch for the operator's --namespace values: each name alone; every namespace when none is
    given, or when one is a pattern (then filtered by the patterns)."""
    if not namespaces:
        return [WatchScope(None)]
    if any(_GLOB & set(namespace) for namespace in namespaces):
        return [WatchScope(None, tuple(namespaces))]
    return [WatchScope(namespace) for namespace in dict.fromkeys(namespaces)]


class Listings:
    """Set (`done`) once every watch has listed each of its scopes once: the reconciles wait for it, so a
    restarted operator knows every job and child that exists before it plans anything."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self._pending: set[str] = set()
        self._listed: set[str] = set()
        self._lock = threading.Lock()

    def expect(self, path: str) -> None:
        with self._lock:
            self._pending.add(path)

    def listed(self, path: str) -> None:
        with self._lock:
            self._listed.add(path)
            self._pending.discard(path)
            if not self._pending:
                self.done.set()

    def state(self) -> dict[str, bool]:
        """Each watched path, and whether it was listed once."""
        with self._lock:
            return {path: path in self._listed for path in sorted(self._pending | self._listed)}


class Reconnects:
    """The pause before a watch tries the API server again, shared by every watch. When the API server goes
    away each watch's failure lengthens the pause of all, except one watch at a time, the probe, which tries
    again after the first pause's length (about one request a second while it is away). The first success
    shortens the pause again and cuts the pauses under way to the first one's length, so that every watch is
    back within a few seconds of the API server. (Shared alone, the failures of five watches added up: a
    watch of pods paused 45 s more once an API server restarted for 5 s was back.)"""

    def __init__(self, backoff: Backoff = RECONNECT_BACKOFF) -> None:
        self._backoff = backoff
        self._failures = 0
        self._successes = 0
        self._probing = False  # a watch's pause is under way, cut to the first pause's length
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def failed(self) -> float:
        """Count a failure; the pause before the next try (`pause` cuts the probe's)."""
        with self._lock:
            self._failures += 1
            return self._backoff.delay(self._failures)

    def succeeded(self) -> None:
        with self._lock:
            self._failures = 0
            self._successes += 1
            self._changed.notify_all()

    def pause(self, seconds: float, stopped: threading.Event) -> None:
        """Wait `seconds`, or the first pause's length where no other watch is the probe or once a watch
        has succeeded meanwhile; not at all once `stopped` is set (`wake` tells the pauses to look)."""
        deadline = time.monotonic() + seconds
        with self._lock:
            probe = not self._probing
            if probe:
                self._probing = True
                deadline = min(deadline, time.monotonic() + self._backoff.delay(1))
            successes = self._successes
            try:
                while not stopped.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return
                    if self._successes != successes:
                        successes = self._successes
                        deadline = min(deadline, time.monotonic() + self._backoff.delay(1))
                        continue
                    self._changed.wait(left)
            finally:
                if probe:
                    self._probing = False

    def wake(self) -> None:
        """Every pause under way looks at its `stopped` again."""
        with self._lock:
            self._changed.notify_all()


class ObjectWatch(Generic[View]):
    """List, then watch from the listing's resourceVersion, for each scope; a relist when the API server
    has forgotten that version (410). `changed` hears of each object whose view changed (its job's key,
    its view, True) and of each one gone (its job's key, its last view, False)."""

    def __init__(
        self,
        kube: ListAndWatch,
        resource: WatchedResource[View],
        store: ObjectStore[View],
        watched: Sequence[WatchScope],
        changed: Callable[[JobKey, View, bool], None],
        *,
        listings: Listings,
        reconnects: Reconnects,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        """`reconnects`: the pause after a failed request, or a watch the API server ended at once.
        `watch_seconds`: how long the API server keeps one watch open."""
        self._kube = kube
        self._resource = resource
        self._store = store
        self._changed = changed
        self._listings = listings
        self._reconnects = reconnects
        self._watch_seconds = watch_seconds
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
        self._reconnects.wake()

    def ended(self) -> list[str]:
        return ended_threads(self._threads, self._stopped.is_set())

    def _run(self, scope: WatchScope) -> None:
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
            except ResourceExpiredError as error:  # compacted away: what happened since is only in a listing
                logger.info("watch of %s: %s; listing again", path, error)
                version = None
            except TransientApiError as error:
                pause = self._reconnects.failed()
                logger.warning("watch of %s: %s; again in %.1f s at most", path, error, pause)
                self._reconnects.pause(pause, self._stopped)
            except Exception:  # a bug here must not stop the operator's sight of these objects for good
                logger.exception("watch of %s failed; listing again", path)
                version = None
                self._reconnects.pause(self._reconnects.failed(), self._stopped)

    def _list(self, scope: WatchScope) -> str | None:
        """Replace what the store holds of the scope with a fresh listing; its resourceVersion, or None when
        the cluster does not serve an optional kind (then the store holds none of it). Every view it changed
        is told, even when the listing breaks off: the next listing finds them unchanged."""
        path = self._resource.path(scope.namespace)
        seen: set[str] = set()
        touched: list[tuple[JobKey, View, bool]] = []
        try:
            version = self._pages(path, scope, seen, touched)
            for uid in self._store.uids(scope.accepts) - seen:
                removed = self._store.remove(uid, deleted=True)
                if removed is not None:
                    touched.append((*removed, False))
            self._reconnects.succeeded()
            self._listings.listed(path)
            return version
        finally:
            for key, view, present in touched:
                self._changed(key, view, present)

    def _pages(
        self, path: str, scope: WatchScope, seen: set[str], touched: list[tuple[JobKey, View, bool]]
    ) -> str | None:
        """Read the listing page by page into the store; its resourceVersion, None when not served. A
        continue token that expired starts the listing over, as client-go does."""
        first = {"limit": str(PAGE), **self._resource.selection()}
        query = first
        try:
            while True:
                try:
                    page = self._kube.list_page(path, query)
                except ResourceExpiredError:
                    if "continue" not in query:
                        raise
                    logger.info("listing of %s: its continue token expired; listing from the start", path)
                    seen.clear()
                    query = first
                    continue
                self._keep(scope, page.get("items") or [], seen, touched)
                listing = page.get("metadata") or {}
                if not listing.get("continue"):
                    if path in self._unserved:
                        logger.info("%s served now", path)
                    self._unserved.discard(path)
                    return str(listing.get("resourceVersion", ""))
                query = {**query, "continue": str(listing["continue"])}
        except NotServedError as error:
            if not self._resource.optional:
                raise
            if path not in self._unserved:
                logger.info("%s not served (%s): none, listed again every %.0f s", path, error, UNSERVED_RETRY_SECONDS)
            self._unserved.add(path)
            seen.clear()
            return None

    def _keep(
        self, scope: WatchScope, items: list[dict[str, Any]], seen: set[str], touched: list[tuple[JobKey, View, bool]]
    ) -> None:
        """Put a page's objects in the store; their uids go to `seen`, those whose view changed to `touched`."""
        for item in items:
            found = self._found(scope, item)
            if found is None:
                continue
            seen.add(found[1])
            if self._store.put(*found):
                touched.append((found[0], found[2], True))

    def _found(self, scope: WatchScope, item: dict[str, Any]) -> Found[View] | None:
        """The object's view, if it is one of the operator's in `scope`. An object whose view fails (a bug, met
        on a shape no one foresaw) is logged with its name, counted and left out: one object must not blind
        the watch, and so the operator, to every other in every namespace."""
        try:
            found = self._resource.view(item)
        except Exception:
            metadata = item.get("metadata")
            name = f"{metadata.get('namespace')}/{metadata.get('name')}" if isinstance(metadata, dict) else "?"
            metrics.ITEM_ERRORS.labels(f"watch-{self._resource.plural}").inc()
            logger.exception("watch of %s: %s cannot be read; left out", self._resource.plural, name)
            return None
        return found if found is not None and scope.accepts(found[0][0]) else None

    def _watch(self, scope: WatchScope, version: str) -> str:
        """Follow events until the API server ends the watch; the version to go on from. Raises
        ResourceExpiredError when the API server no longer has `version`, in the stream or before it."""
        path = self._resource.path(scope.namespace)
        query = {
            "watch": "true",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_seconds),
            **self._resource.selection(),
        }
        heard, started = False, time.monotonic()
        lines = self._kube.stream_lines(path, query, read_timeout=self._watch_seconds + WATCH_SILENCE_MARGIN)
        for event in watch_events(lines):  # an ERROR event raises: the log names the watch
            if self._stopped.is_set():
                return version
            if not heard:
                heard = True
                self._reconnects.succeeded()
            kind, item = event.get("type"), event.get("object") or {}
            version = str((item.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self._apply(scope, kind, item)
        if not heard and time.monotonic() - started < ENDED_AT_ONCE_SECONDS:  # do not hammer the API server
            self._reconnects.pause(self._reconnects.failed(), self._stopped)
        return version

    def _apply(self, scope: WatchScope, kind: str | None, item: dict[str, Any]) -> None:
        found = self._found(scope, item)
        uid = str((item.get("metadata") or {}).get("uid"))
        if kind == "DELETED":
            removed = self._store.remove(uid, deleted=True, last=None if found is None else found[2])
        elif found is not None:
            if self._store.put(*found):
                self._changed(found[0], found[2], True)
            return
        else:
            removed = self._store.remove(uid)  # no longer ours
        if removed is not None:
            self._changed(*removed, False)
