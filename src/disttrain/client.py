"""`Client`: DistTrainJobs (and TFJobs that disttrain serves) from Python, through `disttrain_kube`.

It finds the cluster as kubectl does, and every call takes `namespace=` (else the context's namespace).
Jobs come back as the API models (`DistTrainJob`); a served TFJob comes back in the same terms, its
`kind` still `TFJob`. Waits and log follows are driven by watches, never by sleeping between reads.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from disttrain.calls import call, client_error
from disttrain.errors import (
    ApiError,
    DisttrainError,
    InvalidJobError,
    JobFailedError,
    JobNotFoundError,
    LogsUnavailableError,
    ReplicaNotFoundError,
    TensorBoardUnavailableError,
    WaitTimeoutError,
)
from disttrain.forward import LocalPort, PodAddress, PortForward
from disttrain.job_kinds import RESOURCES, JobKind, Resource, readable_jobs, resource_of, typed_job
from disttrain.kept_log_reader import (
    Attempt,
    KeptLog,
    kept_logs_after_keeper,
    kept_logs_of,
    kept_logs_on_volume,
    kept_replicas,
    replica_label,
)
from disttrain.logs import ReplicaLog, ReplicaLogs, replica_task, unless_gone
from disttrain.progress_view import progress_view
from disttrain.shipped_function import ship
from disttrain.train_job import train_objects
from disttrain_contract.timestamps import parse_time
from disttrain_core import held, naming
from disttrain_core.api import yaml_io
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.api.status import ConditionStatus, ConditionType
from disttrain_core.builders.objects import owner_references
from disttrain_core.builders.tensorboard import (
    TENSORBOARD_OF_LABEL,
    TENSORBOARD_PORT,
    tensorboard_name,
)
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_core.observed import pod_ready
from disttrain_core.summary import kept_log_command
from disttrain_kube.api_errors import NO_ANSWER, ResourceExpiredError, TransientApiError
from disttrain_kube.connection import Connection, NoClusterError, connect
from disttrain_kube.rest import PODS_PATH, WATCH_SILENCE_MARGIN, Kube, watch_events

_WATCH_SECONDS = 60  # one watch request; a wait longer than this watches again from where it was
LIST_PAGE = 10  # jobs per page of a watch's listing: a tenant's may be 2.5 MB with its managedFields, 20 MiB parsed
_EVENTS_PATH = "/api/v1/namespaces/{namespace}/events"
_TOKEN_REVIEWS_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass(frozen=True)
class JobEvent:
    """An Event about the job or one of its pods, volume or Service."""

    time: datetime | None
    type: str  # Normal or Warning
    reason: str
    message: str
    object: str  # kind/name of what the Event is about
    count: int = 1


@dataclass(frozen=True)
class Identity:
    """Whom a bearer token authenticates."""

    username: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED or DELETED
    job: DistTrainJob
    body: Mapping[str, Any]  # the job as the API server stores it (a TFJob in its own shape)


Jobs = list[DistTrainJob]  # `Client.list` names the builtin inside the class
Attempts = list[Attempt]
Objects = list[dict[str, Any]]
Events = list[JobEvent]
JobRef = str | DistTrainJob  # a job's name, or the job itself (its namespace and kind come with it)
Source = str | Path | Mapping[str, Any] | DistTrainJob


class Client:
    """DistTrainJobs from Python: create, get, list, watch, wait, logs, events, delete.

    `Client()` reads the kubeconfig as kubectl does (`KUBECONFIG`, else `~/.kube/config`), or the pod's
    ServiceAccount inside a cluster; `kubeconfig=` and `context=` choose another, `namespace=` the default
    namespace of every call (else the context's, else `default`).
    """

    def __init__(
        self,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        namespace: str | None = None,
        api_client: client.ApiClient | None = None,
    ) -> None:
        context_namespace = None
        if api_client is None:
            connection = _connect(kubeconfig, context)
            api_client, context_namespace = connection.api_client, connection.namespace
        self.api_client = api_client
        self.namespace = namespace or context_namespace or "default"
        self._kube = Kube(api_client)

    def as_bearer(self, token: str, namespace: str | None = None) -> Client:
        """The same cluster, as the holder of `token`: with their rights, not this client's (the dashboard
        reads so for each viewer). Only the server's address and trust travel, never this client's identity."""
        mine = self.api_client.configuration
        theirs = client.Configuration()
        theirs.host, theirs.ssl_ca_cert, theirs.verify_ssl = mine.host, mine.ssl_ca_cert, mine.verify_ssl
        theirs.proxy, theirs.tls_server_name = mine.proxy, mine.tls_server_name
        theirs.api_key = {"authorization": f"Bearer {token}"}
        return Client(api_client=client.ApiClient(theirs), namespace=namespace or self.namespace)

    def review_token(self, token: str) -> Identity | None:
        """Who `token` is, as the API server's TokenReview says; None when it authenticates nobody."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        answer = call(lambda: self._kube.json_request("POST", _TOKEN_REVIEWS_PATH, {}, review), what="a TokenReview")
        status = answer.get("status") or {}
        user = status.get("user")
        if not status.get("authenticated") or not user:
            return None
        return Identity(str(user.get("username") or ""), tuple(user.get("groups") or ()))

    def may_list(self, kind: JobKind = "DistTrainJob", *, namespace: str | None = None) -> bool:
        """Whether this client's identity may list jobs of `kind` in `namespace` (None: in every namespace), as
        the API server's SelfSubjectAccessReview answers, which anyone authenticated may ask."""
        resource = RESOURCES[kind]
        attributes = {"group": resource.group, "resource": resource.plural, "verb": "list"}
        spec = {"resourceAttributes": {**attributes, **({"namespace": namespace} if namespace else {})}}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}
        answer = call(
            lambda: self._kube.json_request("POST", _ACCESS_REVIEWS_PATH, {}, review), what="an access review"
        )
        return bool((answer.get("status") or {}).get("allowed"))

    def namespace_names(self) -> list[str]:
        """The names of the cluster's namespaces, read a page at a time; ApiError where this client may not."""
        items = call(lambda: list(self._kube.list_metadata("/api/v1/namespaces", {})), what="the namespaces")
        return sorted(str(item["metadata"]["name"]) for item in items)

    # --- jobs -------------------------------------------------------------------------------------------

    def create(self, source: Source, *, namespace: str | None = None) -> DistTrainJob:
        """Create a job from a YAML file (one document), a manifest dict or a `DistTrainJob` model."""
        manifest = _manifest(source)
        resource = resource_of(str(manifest.get("kind")))
        metadata = dict(manifest.get("metadata") or {})
        namespace = namespace or metadata.get("namespace") or self.namespace
        manifest = {**manifest, "metadata": {**metadata, "namespace": namespace}}
        body = call(
            lambda: self._kube.json_request(
                "POST", self._collection(resource, namespace), {"namespace": namespace}, manifest
            ),
            what=f"{resource.kind} {namespace}/{metadata.get('name', metadata.get('generateName', '?'))}",
        )
        return typed_job(body)

    def train(self, function: Callable[..., Any], *, namespace: str | None = None, **arguments: Any) -> DistTrainJob:
        """Run `function` in every replica of a new DistTrainJob (`disttrain.train_job.train_objects` names the
        arguments: workers, ps, chief, evaluator, strategy, parameters, image, packages, index_url, resources,
        env, name, queue, checkpoint, tensorboard). Its source travels in a ConfigMap that the job owns; a
        function or an argument that cannot run is refused before anything is created."""
        namespace = namespace or self.namespace
        job, function_map = train_objects(ship(function), namespace=namespace, **arguments)
        maps = "/api/v1/namespaces/{namespace}/configmaps"
        what = f"the ConfigMap of {function.__name__}() in {namespace}"
        call(lambda: self._kube.json_request("POST", maps, {"namespace": namespace}, function_map), what=what)
        function_path = f"{maps}/{function_map['metadata']['name']}"
        try:
            created = self.create(job, namespace=namespace)
        except DisttrainError:
            call(lambda: self._kube.request("DELETE", function_path, {"namespace": namespace}, None), what=what)
            raise
        # owned, not controlled: the garbage collector removes it with the job; blocking the job's deletion would
        # take rights on the job's finalizers where OwnerReferencesPermissionEnforcement is on
        (owner,) = owner_references(created)
        patch = {"metadata": {"ownerReferences": [{**owner, "controller": False, "blockOwnerDeletion": False}]}}
        call(
            lambda: self._kube.json_request(
                "PATCH", function_path, {"namespace": namespace}, patch, content_type="application/merge-patch+json"
            ),
            what=what,
        )
        return created

    def get(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> DistTrainJob:
        return typed_job(self.get_object(job, namespace=namespace, kind=kind))

    def get_object(
        self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob"
    ) -> dict[str, Any]:
        """The job as the API server stores it (a TFJob in its own shape)."""
        resource, namespace, name = self._target(job, namespace, kind)
        found: dict[str, Any] = call(
            lambda: self._kube.json_request("GET", *self._object(resource, namespace, name)),
            what=f"{resource.kind} {namespace}/{name}",
        )
        return found

    def list(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        labels: str | Mapping[str, str] | None = None,
        kind: JobKind = "DistTrainJob",
    ) -> Jobs:
        """The jobs of a namespace (or of every namespace), optionally those matching a label selector."""
        found = self.list_objects(namespace=namespace, all_namespaces=all_namespaces, labels=labels, kind=kind)
        return list(readable_jobs(found))

    def list_objects(
        self,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        labels: str | Mapping[str, str] | None = None,
        kind: JobKind = "DistTrainJob",
    ) -> Objects:
        """As `list`, the jobs as the API server stores them (TFJobs in their own shape)."""
        resource, scope = resource_of(kind), self._scope(namespace, all_namespaces)
        items: Objects = self._list(resource, scope, _selection(None, _selector(labels))).get("items") or []
        return items

    def watch(
        self,
        job: JobRef | None = None,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        labels: str | Mapping[str, str] | None = None,
        kind: JobKind = "DistTrainJob",
        timeout: float | None = None,
        stop: threading.Event | None = None,
        on_listed: Callable[[], None] | None = None,
        page: int = LIST_PAGE,
        listing_gate: AbstractContextManager[object] | None = None,
    ) -> Iterator[WatchEvent]:
        """Each change to the namespace's jobs (or every namespace's, or one job) as it happens, starting
        with each as it is now; `on_listed` is called once each listing's jobs were given (none, too). A listing
        is read `page` jobs at a time, each page within `listing_gate` (held from its read until its jobs were
        given), which a process of many watches shares to bound the pages it parses at once.

        Runs until `timeout` seconds have passed (forever without one), or within a minute of `stop` being
        set. A watch the API server expires is started again from a fresh listing, and a job that went
        meanwhile comes as DELETED: no change is missed."""
        until = _Until(None if timeout is None else time.monotonic() + timeout, stop)
        if job is not None:
            resource, namespace, name = self._target(job, namespace, kind)
            scope: str | None = namespace
            fields: str | None = f"metadata.name={name}"
        else:
            resource, scope, fields = resource_of(kind), self._scope(namespace, all_namespaces), None
        selection = _selection(fields, _selector(labels))
        known: dict[str, dict[str, Any]] = {}  # each job as last seen, for its DELETED: `held.projected` where large
        while True:
            listed: dict[str, dict[str, Any]] = {}
            version = ""
            pages = self._pages(resource, scope, selection, page)
            while True:
                with listing_gate or nullcontext():
                    found = next(pages, None)
                    if found is None:
                        break
                    items, version = found
                    listed.update((_key(item), held.projected(item) or item) for item in items)
                    yield from _events("ADDED", items)
                    del items, found
            for key in known.keys() - listed.keys():
                yield from _events("DELETED", [known[key]])
            known = listed
            if on_listed is not None:
                on_listed()
            for event_type, body in self._watch_from(resource, scope, version, selection, until):
                if event_type == "DELETED":
                    known.pop(_key(body), None)
                else:
                    known[_key(body)] = held.projected(body) or body
                yield from _events(event_type, [body])
            if until.over():
                return

    def wait(
        self,
        job: JobRef,
        condition: str | Iterable[str] = ConditionType.SUCCEEDED,
        *,
        namespace: str | None = None,
        timeout: float = 600,
        kind: JobKind = "DistTrainJob",
        progress: bool = False,
    ) -> DistTrainJob:
        """Wait until one of the conditions is True, and return the job then.

        Driven by a watch of the job: a condition that turns True again later counts, such as Running
        after Kueue suspended the job and resumed it. Raises `JobFailedError` (the job's own message)
        when the job fails while waiting for another condition, `WaitTimeoutError` after `timeout`
        seconds, `JobNotFoundError` when the job does not exist or is deleted meanwhile. `progress`: a line
        of its step, loss and time left, kept current (`disttrain.progress_view`)."""
        wanted = {condition} if isinstance(condition, str) else set(condition)
        unknown = wanted - {member.value for member in ConditionType}
        if unknown:
            known = ", ".join(member.value for member in ConditionType)
            raise ValueError(f"unknown condition {', '.join(sorted(unknown))}: a job's conditions are {known}")
        resource, namespace, name = self._target(job, namespace, kind)
        seen = self.get(name, namespace=namespace, kind=resource.kind)
        view = progress_view() if progress else None
        try:
            for event in self.watch(name, namespace=namespace, kind=resource.kind, timeout=timeout):
                if event.type == "DELETED":
                    raise JobNotFoundError(f"{resource.kind} {namespace}/{name} was deleted while waiting")
                seen = event.job
                if view is not None:
                    view.show(seen)
                if _reached(seen, wanted):
                    return seen
        finally:
            if view is not None:
                view.close()
        waited = f"{resource.kind} {namespace}/{name}: none of {', '.join(sorted(wanted))} within {timeout:g}s"
        raise WaitTimeoutError(seen, f"{waited} (phase {seen.status.phase or 'none yet'})")

    def delete(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> None:
        """Delete the job; its pods, Service and volume go with it (the API server's garbage collector)."""
        resource, namespace, name = self._target(job, namespace, kind)
        call(
            lambda: self._kube.json_request("DELETE", *self._object(resource, namespace, name)),
            what=f"{resource.kind} {namespace}/{name}",
        )

    # --- what belongs to a job ----------------------------------------------------------------------------

    def logs(
        self,
        job: JobRef,
        replica: str | None = None,
        *,
        attempt: int | None = None,
        namespace: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        kind: JobKind = "DistTrainJob",
        start_readers: bool = True,
    ) -> Iterator[str]:
        """The lines of a replica's log (`worker-1`, `chief`; by default the chief, else worker 0), streamed.

        By default the attempt running now, else the last one whose log was kept; `attempt` picks one by its
        number (see `attempts`). Kept logs are read after their pod is gone, and after the job is gone as long
        as its `logs.ttlSecondsAfterJobDeleted` keeps them; those kept on the checkpoint volume
        (`logs.destination: CheckpointVolume`) are read through a pod that mounts it, while the job exists.
        Right after the job ends, a replica whose pod went with it waits up to 20 s (`KEEPER_GRACE`) for the
        operator to keep that pod's log; so does one whose pod goes between this call and the first line.
        `tail` keeps only the last lines. With `follow`, waits while the pod is Pending, goes on through the
        replica's restarts, and ends when the replica succeeds or the job ends.
        Raises `ReplicaNotFoundError` and `AttemptNotFoundError` (naming those there are) and, without `follow`,
        `LogsUnavailableError` when the replica has no log to read now, or (with `start_readers=False`) when
        reading it would start a pod."""
        found = self._replica(job, replica, namespace, kind, start_readers)
        if attempt is not None:
            return found.attempt_lines(attempt, follow=follow, tail=tail)
        if found.job is None or found.log is None:  # the job is gone: its last kept attempt
            return found.kept[-1].lines(tail)
        if found.pod is None and found.kept and (not follow or _finished(found.job)):
            return found.kept[-1].lines(tail)
        if follow:
            return found.log.lines(follow=True, tail=tail)

        def read_again() -> Iterator[str]:
            return self.logs(job, replica, namespace=namespace, tail=tail, kind=kind, start_readers=start_readers)

        return unless_gone(found.log.lines(follow=False, tail=tail), read_again)

    def attempts(
        self,
        job: JobRef,
        replica: str | None = None,
        *,
        namespace: str | None = None,
        kind: JobKind = "DistTrainJob",
        start_readers: bool = True,
    ) -> Attempts:
        """A replica's attempts, the first first: those whose log is kept, then the pod running now."""
        return self._replica(job, replica, namespace, kind, start_readers).attempts

    def _replica(
        self, job: JobRef, replica: str | None, namespace: str | None, kind: JobKind, start_readers: bool = True
    ) -> ReplicaLogs:
        """`start_readers`: logs kept on the checkpoint volume may be read through a pod that mounts it."""
        resource, namespace, name = self._target(job, namespace, kind)
        try:
            found = self.get(job, namespace=namespace, kind=kind)
        except JobNotFoundError as error:
            replicas = kept_replicas(self._kube, namespace, name, resource.kind)
            if not replicas:
                raise JobNotFoundError(
                    f"{error}, and no log of it is kept in ConfigMaps (logs it kept on its checkpoint volume stay "
                    "there, under logs/)"
                ) from None
            label = replica_label(replica) if replica else "chief-0" if "chief-0" in replicas else "worker-0"
            if label not in replicas:
                listed = ", ".join(replicas)
                message = f"{name} is gone and kept no log of {replica or label}; it kept {listed}"
                raise ReplicaNotFoundError(message) from None
            kept = kept_logs_of(self._kube, namespace, name, resource.kind, job_uid=None, replica=label)
            return ReplicaLogs(name, label, lambda: kept)
        task = replica_task(found, replica)

        def finished() -> bool:
            now = self.get(found.metadata.name, namespace=found.metadata.namespace, kind=found.kind)
            return _finished(now)

        log = ReplicaLog(self._kube, found, task, finished)
        label = f"{task[0].task_type}-{task[1]}"
        pod = log.started_pod()

        def read_kept() -> list[KeptLog]:
            if found.spec.logs.on_volume and not start_readers:
                command = kept_log_command(found, label)
                raise LogsUnavailableError(f"{label} keeps its logs on the checkpoint volume: `{command}` reads them")
            if found.spec.logs.on_volume:
                live_uid = pod["metadata"]["uid"] if pod is not None else None
                return kept_logs_on_volume(self._kube, found, label, live_uid=live_uid)
            return kept_logs_after_keeper(self._kube, found, task, label, due=pod is None and _finished(found))

        return ReplicaLogs(name, label, read_kept, found, log, pod)

    def tensorboard(
        self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob", local_port: int = 0
    ) -> LocalPort:
        """A local port that reaches the job's TensorBoard: `with client.tensorboard(job) as board:
        print(board.url)`. A port-forward to its pod through the API server where the node serves one, else
        the pod's own address where this machine reaches it. Raises `TensorBoardUnavailableError` when the job
        runs none, its pod is not ready (with the job's `TensorBoardReady` condition), or neither way reaches
        it."""
        found = self.get(job, namespace=namespace, kind=kind)
        name, namespace = found.metadata.name, found.metadata.namespace
        if not found.spec.tensorboard_enabled:
            raise TensorBoardUnavailableError(f"{name} runs no TensorBoard: spec.tensorboard asks for one")
        pods = self._pods(
            namespace, f"{TENSORBOARD_OF_LABEL}={name}", what=f"the TensorBoard pod of {namespace}/{name}"
        )
        ready = [pod for pod in pods if pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")]
        if not ready:
            said = next((c for c in found.status.conditions if c.type is ConditionType.TENSORBOARD_READY), None)
            why = f"{said.reason}: {said.message}" if said else "its Deployment is not created yet"
            raise TensorBoardUnavailableError(f"the TensorBoard of {name} is not ready ({why})")
        pod = ready[0]
        forward = PortForward(
            self.api_client, namespace, pod["metadata"]["name"], TENSORBOARD_PORT, local_port=local_port
        )
        if forward.works():
            return forward
        forward.close()
        address = (pod.get("status") or {}).get("podIP") or ""
        if address:
            direct = PodAddress(address, TENSORBOARD_PORT, local_port=local_port)
            if direct.works():
                return direct
            direct.close()
        raise TensorBoardUnavailableError(
            f"the TensorBoard of {name} cannot be reached: its node serves no port-forward, and this machine"
            f" reaches no pod address {address or '(none yet)'}:{TENSORBOARD_PORT}"
        )

    def pods(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> Objects:
        """The job's pods as the API server sends them."""
        _, namespace, name = self._target(job, namespace, kind)
        return self._pods(namespace, f"{JOB_NAME_LABEL}={name}", what=f"pods of {namespace}/{name}")

    def events(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> Events:
        """Events about the job and what it owns (its pods, Service and volume claim), oldest first."""
        resource, namespace, name = self._target(job, namespace, kind)
        answer = call(
            lambda: self._kube.json_request("GET", _EVENTS_PATH, {"namespace": namespace}),
            what=f"events in {namespace}",
        )
        found = [
            _job_event(item)
            for item in answer.get("items") or []
            if _about_job(item.get("involvedObject") or {}, resource.kind, name)
        ]
        return sorted(found, key=lambda event: (event.time is None, event.time or datetime.min))

    # --- plumbing -----------------------------------------------------------------------------------------

    def _target(self, job: JobRef, namespace: str | None, kind: JobKind) -> tuple[Resource, str, str]:
        if isinstance(job, DistTrainJob):
            return RESOURCES[job.kind], namespace or job.metadata.namespace, job.metadata.name
        return resource_of(kind), namespace or self.namespace, job

    def _scope(self, namespace: str | None, all_namespaces: bool) -> str | None:
        """The namespace a listing asks for; None for every namespace."""
        return None if all_namespaces else namespace or self.namespace

    def _collection(self, resource: Resource, scope: str | None) -> str:
        """The path of the jobs of a namespace, `{namespace}` left to fill; of every namespace for None."""
        return self._kube.resources.collection(resource.api_version, resource.kind, every_namespace=scope is None)

    def _object(self, resource: Resource, namespace: str, name: str) -> tuple[str, dict[str, str]]:
        return f"{self._collection(resource, namespace)}/{{name}}", {"namespace": namespace, "name": name}

    def _list(self, resource: Resource, scope: str | None, selection: dict[str, str]) -> dict[str, Any]:
        """The jobs of a namespace (or of every one, for None), as the API server lists them."""
        params = {} if scope is None else {"namespace": scope}
        path = self._collection(resource, scope)
        listing: dict[str, Any] = call(
            lambda: self._kube.json_request("GET", path, params, query=selection), what=_where(resource, scope)
        )
        return listing

    def _pages(
        self, resource: Resource, scope: str | None, selection: dict[str, str], page: int
    ) -> Iterator[tuple[Objects, str]]:
        """The jobs as the API server lists them, `page` at a time, each with the listing's version: a tenant's
        job may be as large as etcd takes, so a whole listing is never parsed at once."""
        query = {**selection, "limit": str(page)}
        while True:
            listing = self._list(resource, scope, query)
            yield list(listing.get("items") or []), str(listing["metadata"]["resourceVersion"])
            token = listing["metadata"].get("continue")
            if not token:
                return
            query = {**query, "continue": str(token)}

    def _pods(self, namespace: str, selector: str, *, what: str) -> Objects:
        query = {"labelSelector": selector}
        answer = call(
            lambda: self._kube.json_request("GET", PODS_PATH, {"namespace": namespace}, query=query), what=what
        )
        return list(answer.get("items") or [])

    def _watch_from(
        self, resource: Resource, scope: str | None, version: str, selection: dict[str, str], until: _Until
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch from `version` until `until` is over, or until the API server says the version expired."""
        params = {} if scope is None else {"namespace": scope}
        path = self._collection(resource, scope)
        while not until.over():
            seconds = max(1, math.ceil(until.seconds_left(_WATCH_SECONDS)))
            query = {
                **selection,
                "watch": "true",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(seconds),
            }
            try:
                for event in watch_events(self._kube.stream_lines(path, query, seconds + WATCH_SILENCE_MARGIN, params)):
                    body = event.get("object") or {}
                    version = body.get("metadata", {}).get("resourceVersion", version)
                    if event.get("type") != "BOOKMARK":
                        yield str(event.get("type")), body
            except ResourceExpiredError:
                return  # listed again by the caller
            except TransientApiError as error:
                if error.status == NO_ANSWER:
                    return  # the connection broke: listed again by the caller
                raise client_error(error, f"watching {_where(resource, scope)}") from error


@dataclass(frozen=True)
class _Until:
    """When a watch ends: at a deadline (monotonic), once `stop` is set, or never."""

    deadline: float | None
    stop: threading.Event | None

    def over(self) -> bool:
        expired = self.deadline is not None and time.monotonic() >= self.deadline
        return expired or (self.stop is not None and self.stop.is_set())

    def seconds_left(self, longest: float) -> float:
        return longest if self.deadline is None else min(longest, self.deadline - time.monotonic())


def _connect(kubeconfig: str | Path | None, context: str | None) -> Connection:
    try:
        return connect(kubeconfig, context)
    except NoClusterError as error:
        raise ApiError(0, str(error)) from error


def _manifest(source: Source) -> dict[str, Any]:
    if isinstance(source, DistTrainJob):
        if source.kind != "DistTrainJob":
            raise InvalidJobError("a served TFJob is created from its own manifest (a dict or a file), not a model")
        return source.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"status"})
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    if not path.is_file():
        raise InvalidJobError(f"{source}: no such file")
    try:
        documents = yaml_io.load_all(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:  # yaml.YAMLError is a ValueError here too
        raise InvalidJobError(f"{source}: {error}") from error
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise InvalidJobError(f"{source}: expected one job manifest, found {len(documents)} documents")
    found: dict[str, Any] = documents[0]
    return found


def _where(resource: Resource, scope: str | None) -> str:
    return f"{resource.plural} in {scope}" if scope is not None else f"{resource.plural} in every namespace"


def _events(event_type: str, bodies: Iterable[Mapping[str, Any]]) -> Iterator[WatchEvent]:
    """The events of the jobs the models can read (`readable_jobs` leaves the others out, saying so)."""
    for body in bodies:
        for job in readable_jobs([body]):
            yield WatchEvent(event_type, job, body)


def _key(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _selection(fields: str | None, labels: str | None) -> dict[str, str]:
    """A listing's query: the field and label selectors given."""
    return {key: value for key, value in (("fieldSelector", fields), ("labelSelector", labels)) if value}


def _selector(labels: str | Mapping[str, str] | None) -> str | None:
    if labels is None or isinstance(labels, str):
        return labels
    return ",".join(f"{key}={value}" for key, value in labels.items())


def _reached(job: DistTrainJob, wanted: set[str]) -> bool:
    """True once a wanted condition holds; JobFailedError once the job failed and Failed was not wanted."""
    holding = {
        condition.type.value: condition
        for condition in job.status.conditions
        if condition.status is ConditionStatus.TRUE
    }
    if wanted & holding.keys():
        return True
    failed = holding.get(ConditionType.FAILED.value)
    if failed is not None:
        raise JobFailedError(
            job, f"{job.kind} {job.metadata.namespace}/{job.metadata.name} failed: {failed.reason}: {failed.message}"
        )
    return False


def _finished(job: DistTrainJob) -> bool:
    ended = {ConditionType.SUCCEEDED, ConditionType.FAILED}
    return any(c.type in ended and c.status is ConditionStatus.TRUE for c in job.status.conditions)


def _about_job(involved: Mapping[str, Any], kind: str, name: str) -> bool:
    """The job itself, or what it owns by name: its pods (`{job}-{type}-{index}`), its Service, its volume
    claim and its TensorBoard; never a namesake's (`train-v2-worker-0` is not `train`'s)."""
    target, involved_kind = str(involved.get("name", "")), involved.get("kind")
    if involved_kind == kind:
        return target == name
    owned = {
        "Service": {naming.service_name(name), tensorboard_name(name)},
        "PersistentVolumeClaim": {naming.checkpoint_claim_name(name)},
        "Deployment": {tensorboard_name(name)},
    }
    if involved_kind == "Pod":
        task = target.removeprefix(f"{name}-").rpartition("-")
        return target.startswith(f"{name}-") and task[0] in _TASK_TYPES and task[2].isascii() and task[2].isdigit()
    return target in owned.get(str(involved_kind), set())


_TASK_TYPES = frozenset(replica_type.task_type for replica_type in ReplicaType)


def _count(value: Any) -> int:
    """An Event's count as anyone who may post Events wrote it: a number, else 1."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _job_event(item: Mapping[str, Any]) -> JobEvent:
    involved = item.get("involvedObject") or {}
    stamp = item.get("lastTimestamp") or item.get("eventTime") or (item.get("metadata") or {}).get("creationTimestamp")
    return JobEvent(
        time=parse_time(stamp),
        type=str(item.get("type", "")),
        reason=str(item.get("reason", "")),
        message=str(item.get("message", "")),
        object=f"{involved.get('kind', '')}/{involved.get('name', '')}",
        count=_count(item.get("count")),
    )
