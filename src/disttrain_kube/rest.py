"""Requests to the API server as plain JSON, for every part of disttrain: the operator, the client,
the dashboard (through the client), the benchmarks and the development tools.

They go through the kubernetes client's transport (its auth, TLS and kubeconfig handling), without
its model classes: the builders already produce JSON, and validating every pod through the client's
models costs time and refuses valid objects (integer quantities). Every request has a timeout.
urllib3 repeats a request that could not connect, or an idempotent one whose answer broke off
(`connection.connect`'s `retries`); whether a failure the API server answered is worth repeating is
the caller's to decide from the error's class (`disttrain_kube.api_errors`).

Creates tolerate 409 (the object exists: a retry, a second event or a restarted operator), so every
caller can simply ask again. Paths come from `Resources`: the models and the API server's discovery.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kubernetes import client

from disttrain_core.types import Manifest
from disttrain_kube.api_errors import (
    HTTP_CONFLICT,
    HTTP_FORBIDDEN,
    HTTP_GONE,
    HTTP_NOT_FOUND,
    HTTP_UNPROCESSABLE,
    NETWORK_ERRORS,
    LogUnreadableError,
    NotServedError,
    RefusedError,
    TransientApiError,
    error_for,
    server_message,
    watch_error,
)
from disttrain_kube.resources import Resources

_PERMANENT = {400, 422}
PODS_PATH = "/api/v1/namespaces/{namespace}/pods"
POD_PATH = PODS_PATH + "/{name}"
_CONNECT_TIMEOUT = 30.0
_LOG_READ_TIMEOUT = 60.0  # a node that stops sending a log that has ended has failed
_FOLLOW_READ_TIMEOUT = 600.0  # a container stopping may be silent a while (a checkpoint saved on SIGTERM)
REQUEST_TIMEOUT = (_CONNECT_TIMEOUT, 60.0)
# A watch's stream silent this long past the watch's own timeout is taken for a dead connection.
WATCH_SILENCE_MARGIN = 10
_CHUNK = 1 << 16
METADATA_PAGE = 10  # objects of a metadata listing read at once: a tenant's may be a megabyte each


ReportError = Callable[[str], None]  # told the method of each request that failed (the operator counts them)


class Kube:
    def __init__(
        self,
        api_client: client.ApiClient,
        timeout: tuple[float, float] = REQUEST_TIMEOUT,
        *,
        on_error: ReportError | None = None,
        resources: Resources | None = None,
    ) -> None:
        """`timeout`: (connect, read) seconds of every request that names none of its own: a request that hangs
        must not hold a reconcile, a kept-log keeper or a lease renewal for ever."""
        self.api_client = api_client
        self._timeout = timeout
        self._on_error = on_error or _ignore
        self.resources = resources or Resources(self._discovery)

    def with_timeout(self, seconds: float) -> Kube:
        """The same client, each request given at most `seconds` to connect and as long to read."""
        return Kube(self.api_client, (seconds, seconds), on_error=self._on_error, resources=self.resources)

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        body: Any,
        *,
        content_type: str = "application/json",
        accept: str = "application/json",
        query: dict[str, str] | None = None,
        timeout: tuple[float, float] | None = None,
    ) -> Any:
        """The request sent, its answer not yet read (a `RESTResponse`)."""
        headers = {"Content-Type": content_type, "Accept": accept}
        try:
            method, url, headers, payload, _ = self.api_client.param_serialize(
                method=method,
                resource_path=path,
                path_params=params,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            return self.api_client.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=timeout or self._timeout
            )
        except NETWORK_ERRORS as error:
            self._on_error(method)
            raise TransientApiError(0, f"{method} {path}: {error}") from error

    def request(self, method: str, path: str, params: dict[str, str], body: Any, **options: Any) -> tuple[int, str]:
        """Any request and its whole answer: status code and text. `options` as for `_send`."""
        response = self._send(method, path, params, body, **options)
        try:
            response.read()
        except NETWORK_ERRORS as error:
            self._on_error(method)
            raise TransientApiError(0, f"{method} {path}: {error}") from error
        if response.status >= 300 and response.status not in (HTTP_CONFLICT, HTTP_NOT_FOUND, HTTP_GONE):
            self._on_error(method)
        return response.status, (response.data or b"").decode(errors="replace")

    def json_request(self, method: str, path: str, params: dict[str, str], body: Any = None, **options: Any) -> Any:
        """A request whose answer is JSON, read as the API server wrote it; any error status as its error
        (`errors.error_for`), in the API server's words: the caller says what it asked. `options` as for
        `_send`."""
        code, text = self.request(method, path, params, body, **options)
        if code >= 300:
            raise error_for(code, text)
        return json.loads(text) if text else None

    def _discovery(self, path: str) -> dict[str, Any] | None:
        code, text = self.request("GET", path, {}, None)
        if code == HTTP_NOT_FOUND:
            return None
        if code >= 300:
            raise error_for(code, text, f"GET {path}")
        document: dict[str, Any] = json.loads(text)
        return document

    def collection(self, manifest: Mapping[str, Any]) -> str:
        """The path of the manifest's collection, `{namespace}` left to fill for a namespaced kind."""
        return self.resources.collection(manifest["apiVersion"], manifest["kind"])

    def object_path(self, manifest: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        metadata = manifest["metadata"]
        params = {"namespace": metadata.get("namespace", ""), "name": metadata["name"]}
        return f"{self.collection(manifest)}/{{name}}", params

    def create(self, manifest: Manifest) -> bool:
        """Create the object; False if it already existed. RefusedError when the object can never be
        accepted as built (invalid, refused by a policy, a kind not served)."""
        path = self.collection(manifest)
        status, text = self.request("POST", path, {"namespace": manifest["metadata"].get("namespace", "")}, manifest)
        if status == HTTP_CONFLICT:
            return False
        if status in _PERMANENT or _refused_by_policy(status, text):
            raise RefusedError(status, server_message(text))
        if status == HTTP_NOT_FOUND and _unserved(text):
            served = f"{manifest['apiVersion']} {path.rsplit('/', 1)[-1]}"
            raise RefusedError(status, f"the cluster does not serve {served} ({server_message(text)})")
        if status >= 300:
            raise error_for(status, text)
        return True

    def _delete(
        self,
        path: str,
        namespace: str,
        name: str,
        grace_seconds: int | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete; False if it was already gone. Children go with the job through the garbage collector.
        With `resource_version`, only that version is deleted: a newer one is a ConflictError."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        if resource_version is not None:
            body["preconditions"] = {"resourceVersion": resource_version}
        status, text = self.request("DELETE", path, {"namespace": namespace, "name": name}, body)
        if status == HTTP_NOT_FOUND:
            return False
        if status >= 300:
            raise error_for(status, text)
        return True

    def delete_pod(self, namespace: str, name: str, force: bool = False, resource_version: str | None = None) -> bool:
        """`force` removes the pod without its kubelet's confirmation (a node that stopped reporting).

        The API server removes a pod that has ended at once, log and all, where it stops a running one
        gracefully: `resource_version` deletes the pod only as it was seen, so one that ended since is
        refused (ConflictError) and can have its log kept first."""
        return self._delete(
            POD_PATH, namespace, name, grace_seconds=0 if force else None, resource_version=resource_version
        )

    def delete_job(self, job: Mapping[str, Any]) -> bool:
        """A DistTrainJob or a served TFJob, addressed by its apiVersion, kind and metadata."""
        return self.delete_object(job)

    def delete_object(self, manifest: Mapping[str, Any]) -> bool:
        """Delete a namespaced object; False if it was already gone."""
        path, params = self.object_path(manifest)
        return self._delete(path, params["namespace"], params["name"])

    def _patch(
        self, path: str, params: dict[str, str], body: Any, content_type: str, query: dict[str, str] | None = None
    ) -> None:
        code, text = self.request("PATCH", path, params, body, content_type=content_type, query=query)
        if code >= 300:
            raise error_for(code, text)

    def patch_job_status(self, job: Mapping[str, Any], status: dict[str, Any]) -> None:
        self.patch_object_status(job, {"status": status})

    def patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        """A JSON merge patch of the job itself (Kueue's suspend and pod set changes)."""
        path, params = self.object_path(job)
        self._patch(path, params, patch, "application/merge-patch+json")

    def patch_object_status(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> None:
        """A JSON merge patch of an object's status subresource (a job's status, a Workload's released quota)."""
        path, params = self.object_path(manifest)
        self._patch(f"{path}/status", params, patch, "application/merge-patch+json")

    def apply_status_condition(self, manifest: Manifest, condition: dict[str, Any], field_manager: str) -> None:
        """Server-side apply of one condition to an object's status: other owners' conditions stay."""
        path, params = self.object_path(manifest)
        body = {
            "apiVersion": manifest["apiVersion"],
            "kind": manifest["kind"],
            "metadata": params,
            "status": {"conditions": [condition]},
        }
        query = {"fieldManager": field_manager, "force": "true"}
        self._patch(f"{path}/status", params, body, "application/apply-patch+yaml", query=query)

    def list_items(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.list_page(path, query).get("items") or []
        return items

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        """A list as the API server answers it: items, and metadata with resourceVersion and continue."""
        code, text = self.request("GET", path, {}, None, query=query)
        if code in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
            raise NotServedError(code, server_message(text))
        if code >= 300:
            raise error_for(code, text)
        page: dict[str, Any] = json.loads(text)
        return page

    def stream_lines(
        self, path: str, query: dict[str, str], read_timeout: float, params: dict[str, str] | None = None
    ) -> Iterator[bytes]:
        """The lines of a long GET (a watch) as they arrive, each read once and not kept."""
        timeout = (_CONNECT_TIMEOUT, read_timeout)
        response = self._send("GET", path, params or {}, None, query=query, timeout=timeout)
        raw = response.response
        try:
            if response.status >= 300:
                raise watch_error(response.status, server_message(raw.read().decode(errors="replace")))
            pending = b""
            for chunk in raw.stream(_CHUNK):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                yield from (line for line in lines if line.strip())
        except NETWORK_ERRORS as error:  # the connection broke or went quiet past read_timeout
            raise TransientApiError(0, f"GET {path}: {error}") from error
        finally:
            raw.release_conn()

    def pod_log_chunks(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        follow: bool = False,
        query: dict[str, str] | None = None,
        read_timeout: float | None = None,
    ) -> Iterator[bytes]:
        """A container's whole log as it arrives, in chunks, and with `follow` what it writes until it ends;
        LogUnreadableError when the API server cannot give it. `query`: more of the log request's options
        (`tailLines`, `sinceSeconds`, `timestamps`); `read_timeout`: how long the stream may be silent."""
        path, params = f"{POD_PATH}/log", {"namespace": namespace, "name": name}
        query = {"container": container, **({"follow": "true"} if follow else {}), **(query or {})}
        read_timeout = read_timeout or (_FOLLOW_READ_TIMEOUT if follow else _LOG_READ_TIMEOUT)
        response = self._send("GET", path, params, None, query=query, timeout=(_CONNECT_TIMEOUT, read_timeout))
        raw = response.response
        try:
            if response.status >= 300:
                text = raw.read().decode(errors="replace")
                raise LogUnreadableError(response.status, server_message(text))
            yield from raw.stream(_CHUNK)
        except NETWORK_ERRORS as error:
            raise TransientApiError(0, f"GET {path}: {error}") from error
        finally:
            raw.release_conn()

    def patch_pod(self, namespace: str, name: str, patch: list[dict[str, Any]]) -> bool:
        """A JSON patch of a pod; False when the pod is gone or changed under the patch's tests."""
        code, text = self.request(
            "PATCH", POD_PATH, {"namespace": namespace, "name": name}, patch, content_type="application/json-patch+json"
        )
        if code in (HTTP_NOT_FOUND, HTTP_CONFLICT, HTTP_UNPROCESSABLE):
            return False
        if code >= 300:
            raise error_for(code, text)
        return True

    def list_metadata(self, path: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        """The objects' metadata only (PartialObjectMetadata), read a page of METADATA_PAGE at a time as the
        caller goes on: a tenant's object may carry about a megabyte of labels, so a whole listing is never
        held at once."""
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        paged = {**query, "limit": str(METADATA_PAGE)}
        while True:
            page = self.json_request("GET", path, {}, query=paged, accept=accept)
            yield from page.get("items") or []
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return
            paged = {**paged, "continue": str(token)}

    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool:
        """A JSON merge patch of any namespaced object; False when it is gone."""
        path, params = self.object_path(manifest)
        code, text = self.request("PATCH", path, params, patch, content_type="application/merge-patch+json")
        if code == HTTP_NOT_FOUND:
            return False
        if code >= 300:
            raise error_for(code, text)
        return True

    def pod_log(self, namespace: str, name: str, tail: int | None = None) -> str:
        query = {"tailLines": str(tail)} if tail is not None else {}
        return self.get_text(f"{POD_PATH}/log", {"namespace": namespace, "name": name}, query)

    def get_text(self, path: str, params: dict[str, str], query: dict[str, str] | None = None) -> str:
        """A GET whose answer is text, not an object: a pod's log, the API server's own /metrics."""
        code, text = self.request("GET", path, params, None, query=query)
        if code >= 300:
            raise error_for(code, text)
        return text

    def get_cluster_object(self, api_version: str, plural: str, name: str) -> dict[str, Any] | None:
        """A cluster-scoped object (a Kueue ResourceFlavor); None when it does not exist."""
        return self.read(f"/apis/{api_version}/{plural}/{{name}}", {"name": name})

    def replace(self, path: str, params: dict[str, str], body: dict[str, Any]) -> bool:
        """PUT with the body's resourceVersion; False when someone wrote the object since it was read."""
        code, text = self.request("PUT", path, params, body)
        if code == HTTP_CONFLICT:
            return False
        if code >= 300:
            raise error_for(code, text)
        return True

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        """GET one object; None when it does not exist."""
        code, text = self.request("GET", path, params, None)
        if code == HTTP_NOT_FOUND:
            return None
        if code >= 300:
            raise error_for(code, text)
        found: dict[str, Any] = json.loads(text)
        return found


def watch_events(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The events of a watch's lines (`Kube.stream_lines`): ADDED, MODIFIED, DELETED and BOOKMARK; an ERROR
    event as the error it means (`ResourceExpiredError` when the version asked for is compacted away)."""
    for line in lines:
        event: dict[str, Any] = json.loads(line)
        if event.get("type") == "ERROR":
            status = event.get("object") or {}
            raise watch_error(int(status.get("code") or 0), str(status.get("message")))
        yield event


def _ignore(method: str) -> None:
    """No one counts this client's failed requests."""


# Admission refusing the object as built, not the caller's rights or a full quota, which can pass later.
_POLICY_REFUSALS = ("violates PodSecurity", "denied request", "denied the request")


def _refused_by_policy(status: int, text: str) -> bool:
    return status == HTTP_FORBIDDEN and any(marker in text for marker in _POLICY_REFUSALS)


def _unserved(text: str) -> bool:
    """A 404 for the resource itself (its API is not served), not for a namespace or an object it names."""
    try:
        details = json.loads(text).get("details") or {}
    except (ValueError, AttributeError):
        return False
    return not details.get("kind")
