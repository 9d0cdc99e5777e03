"""`Client`: DistTrainJobs (and TFJobs that disttrain serves) from Python, over the `kubernetes` client.

It finds the cluster as kubectl does, and every call takes `namespace=` (else the context's namespace).
Jobs come back as the API models (`DistTrainJob`); a served TFJob comes back in the same terms, its
`kind` still `TFJob`. Waits and log follows are driven by watches, never by sleeping between reads.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from disttrain.calls import HTTP_GONE, NETWORK_ERRORS, api_error, call, read_json
from disttrain.errors import ApiError, InvalidJobError, JobFailedError, JobNotFoundError, WaitTimeoutError
from disttrain.logs import ReplicaLog, replica_task
from disttrain.resources import RESOURCES, JobKind, Resource, resource_of, typed_job
from disttrain_contract.timestamps import parse_time
from disttrain_operator.api import yaml_io
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.status import ConditionStatus, ConditionType
from disttrain_operator.core.builders.naming import JOB_NAME_LABEL

_IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_WATCH_SECONDS = 60  # one watch request; a wait longer than this watches again from where it was


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
class WatchEvent:
    type: str  # ADDED, MODIFIED or DELETED
    job: DistTrainJob


Jobs = list[DistTrainJob]  # `Client.list` names the builtin inside the class
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
            api_client, context_namespace = _connect(kubeconfig, context)
        self.api_client = api_client
        self.namespace = namespace or context_namespace or "default"
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    # --- jobs -------------------------------------------------------------------------------------------

    def create(self, source: Source, *, namespace: str | None = None) -> DistTrainJob:
        """Create a job from a YAML file (one document), a manifest dict or a `DistTrainJob` model."""
        manifest = _manifest(source)
        resource = resource_of(str(manifest.get("kind")))
        metadata = dict(manifest.get("metadata") or {})
        namespace = namespace or metadata.get("namespace") or self.namespace
        manifest = {**manifest, "metadata": {**metadata, "namespace": namespace}}
        body = call(
            lambda: self._custom.create_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, manifest
            ),
            what=f"{resource.kind} {namespace}/{metadata.get('name', metadata.get('generateName', '?'))}",
        )
        return typed_job(body)

    def get(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> DistTrainJob:
        return typed_job(self.get_object(job, namespace=namespace, kind=kind))

    def get_object(
        self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob"
    ) -> dict[str, Any]:
        """The job as the API server stores it (a TFJob in its own shape)."""
        resource, namespace, name = self._target(job, namespace, kind)
        found: dict[str, Any] = call(
            lambda: self._custom.get_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, name
            ),
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
        resource = resource_of(kind)
        selector = _selector(labels)
        if all_namespaces:
            answer = call(
                lambda: self._custom.list_cluster_custom_object(
                    resource.group, resource.version, resource.plural, label_selector=selector
                ),
                what=f"{resource.plural} in every namespace",
            )
        else:
            namespace = namespace or self.namespace
            answer = call(
                lambda: self._custom.list_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, label_selector=selector
                ),
                what=f"{resource.plural} in {namespace}",
            )
        return [typed_job(item) for item in answer.get("items") or []]

    def watch(
        self,
        job: JobRef | None = None,
        *,
        namespace: str | None = None,
        labels: str | Mapping[str, str] | None = None,
        kind: JobKind = "DistTrainJob",
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Each change to the namespace's jobs (or to one job) as it happens, starting with each as it is now.

        Runs until `timeout` seconds have passed (forever without one); a watch the API server expires is
        started again from a fresh listing, so no change is missed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if job is not None:
            resource, namespace, name = self._target(job, namespace, kind)
            fields: str | None = f"metadata.name={name}"
        else:
            resource, namespace, fields = resource_of(kind), namespace or self.namespace, None
        selector = _selector(labels)
        while True:
            listing = call(
                lambda: self._custom.list_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural,
                    label_selector=selector, field_selector=fields,
                ),
                what=f"{resource.plural} in {namespace}",
            )  # fmt: skip
            for item in listing.get("items") or []:
                yield WatchEvent("ADDED", typed_job(item))
            version = listing["metadata"]["resourceVersion"]
            for event_type, body in self._watch_from(
                resource, namespace, version, fields=fields, selector=selector, deadline=deadline
            ):
                yield WatchEvent(event_type, typed_job(body))
            if deadline is not None and time.monotonic() >= deadline:
                return

    def wait(
        self,
        job: JobRef,
        condition: str | Iterable[str] = ConditionType.SUCCEEDED,
        *,
        namespace: str | None = None,
        timeout: float = 600,
        kind: JobKind = "DistTrainJob",
    ) -> DistTrainJob:
        """Wait until one of the conditions is True, and return the job then.

        Driven by a watch of the job: a condition that turns True again later counts, such as Running
        after Kueue suspended the job and resumed it. Raises `JobFailedError` (the job's own message)
        when the job fails while waiting for another condition, `WaitTimeoutError` after `timeout`
        seconds, `JobNotFoundError` when the job does not exist or is deleted meanwhile."""
        wanted = {condition} if isinstance(condition, str) else set(condition)
        unknown = wanted - {member.value for member in ConditionType}
        if unknown:
            known = ", ".join(member.value for member in ConditionType)
            raise ValueError(f"unknown condition {', '.join(sorted(unknown))}: a job's conditions are {known}")
        resource, namespace, name = self._target(job, namespace, kind)
        seen = self.get(name, namespace=namespace, kind=resource.kind)
        for event in self.watch(name, namespace=namespace, kind=resource.kind, timeout=timeout):
            if event.type == "DELETED":
                raise JobNotFoundError(f"{resource.kind} {namespace}/{name} was deleted while waiting")
            seen = event.job
            if _settled(seen, wanted):
                return seen
        waited = f"{resource.kind} {namespace}/{name}: none of {', '.join(sorted(wanted))} within {timeout:g}s"
        raise WaitTimeoutError(seen, f"{waited} (phase {seen.status.phase or 'none yet'})")

    def delete(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> None:
        """Delete the job; its pods, Service and volume go with it (the API server's garbage collector)."""
        resource, namespace, name = self._target(job, namespace, kind)
        call(
            lambda: self._custom.delete_namespaced_custom_object(
                resource.group, resource.version, namespace, resource.plural, name
            ),
            what=f"{resource.kind} {namespace}/{name}",
        )

    # --- what belongs to a job ----------------------------------------------------------------------------

    def logs(
        self,
        job: JobRef,
        replica: str | None = None,
        *,
        namespace: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        kind: JobKind = "DistTrainJob",
    ) -> Iterator[str]:
        """The lines of a replica's log (`worker-1`, `chief`; by default the chief, else worker 0), streamed.

        `tail` keeps only the last lines. With `follow`, waits while the pod is Pending, goes on through
        the replica's restarts, and ends when the replica succeeds or the job ends. Raises
        `ReplicaNotFoundError` (naming the replicas there are) and, without `follow`,
        `LogsUnavailableError` when the replica has no started container now."""
        found = self.get(job, namespace=namespace, kind=kind)
        task = replica_task(found, replica)

        def finished() -> bool:
            now = self.get(found.metadata.name, namespace=found.metadata.namespace, kind=found.kind)
            return _finished(now)

        return ReplicaLog(self._core, found, task, finished).lines(follow=follow, tail=tail)

    def pods(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> Objects:
        """The job's pods as the API server sends them."""
        _, namespace, name = self._target(job, namespace, kind)
        answer = read_json(
            lambda: self._core.list_namespaced_pod(
                namespace, label_selector=f"{JOB_NAME_LABEL}={name}", _preload_content=False
            ),
            what=f"pods of {namespace}/{name}",
        )
        return list(answer.get("items") or [])

    def events(self, job: JobRef, *, namespace: str | None = None, kind: JobKind = "DistTrainJob") -> Events:
        """Events about the job and what it owns (its pods, Service and volume claim), oldest first."""
        resource, namespace, name = self._target(job, namespace, kind)
        answer = read_json(
            lambda: self._core.list_namespaced_event(namespace, _preload_content=False),
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

    def _watch_from(
        self,
        resource: Resource,
        namespace: str,
        version: str,
        *,
        fields: str | None,
        selector: str | None,
        deadline: float | None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Watch from `version` until the deadline, or until the API server says the version expired."""
        while deadline is None or time.monotonic() < deadline:
            seconds = _WATCH_SECONDS if deadline is None else min(_WATCH_SECONDS, deadline - time.monotonic())
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                self._custom.list_namespaced_custom_object,
                resource.group,
                resource.version,
                namespace,
                resource.plural,
                field_selector=fields,
                label_selector=selector,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, math.ceil(seconds)),
            )
            try:
                for event in stream:
                    body = event["raw_object"]
                    version = body.get("metadata", {}).get("resourceVersion", version)
                    if event["type"] != "BOOKMARK":
                        yield event["type"], body
            except ApiException as error:
                if error.status == HTTP_GONE:
                    return  # listed again by the caller
                raise api_error(error, f"watching {resource.plural} in {namespace}") from error
            except NETWORK_ERRORS:
                return  # listed again by the caller


def _connect(kubeconfig: str | Path | None, context: str | None) -> tuple[client.ApiClient, str | None]:
    """As kubectl: a kubeconfig named, else `KUBECONFIG` or `~/.kube/config`, else the pod's ServiceAccount."""
    if kubeconfig is None and context is None and not _default_kubeconfig_exists():
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException as error:
            raise ApiError(0, f"no kubeconfig ({_default_kubeconfig()}) and not in a cluster: {error}") from error
        namespace = _IN_CLUSTER_NAMESPACE.read_text().strip() if _IN_CLUSTER_NAMESPACE.exists() else None
        return client.ApiClient(), namespace
    path = str(kubeconfig) if kubeconfig is not None else None
    try:
        api_client = config.new_client_from_config(config_file=path, context=context)  # type: ignore[no-untyped-call]
        contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except config.ConfigException as error:
        raise ApiError(0, f"kubeconfig {path or _default_kubeconfig()}: {error}") from error
    chosen = next((entry for entry in contexts if entry["name"] == context), active) if context else active
    return api_client, (chosen or {}).get("context", {}).get("namespace")


def _default_kubeconfig() -> str:
    return os.environ.get("KUBECONFIG") or str(Path("~/.kube/config").expanduser())


def _default_kubeconfig_exists() -> bool:
    return any(Path(path).expanduser().exists() for path in _default_kubeconfig().split(os.pathsep) if path)


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


def _selector(labels: str | Mapping[str, str] | None) -> str | None:
    if labels is None or isinstance(labels, str):
        return labels
    return ",".join(f"{key}={value}" for key, value in labels.items())


def _settled(job: DistTrainJob, wanted: set[str]) -> bool:
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
    """The job itself, or what it owns: its pods (`{job}-{type}-{index}`), its Service and its volume claim."""
    target = str(involved.get("name", ""))
    if involved.get("kind") == kind:
        return target == name
    return involved.get("kind") in ("Pod", "Service", "PersistentVolumeClaim") and (
        target == name or target.startswith(f"{name}-")
    )


def _job_event(item: Mapping[str, Any]) -> JobEvent:
    involved = item.get("involvedObject") or {}
    stamp = item.get("lastTimestamp") or item.get("eventTime") or (item.get("metadata") or {}).get("creationTimestamp")
    return JobEvent(
        time=parse_time(stamp),
        type=str(item.get("type", "")),
        reason=str(item.get("reason", "")),
        message=str(item.get("message", "")),
        object=f"{involved.get('kind', '')}/{involved.get('name', '')}",
        count=int(item.get("count") or 1),
    )
