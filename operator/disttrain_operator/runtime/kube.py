"""The only module that talks to the API server for the operator's own writes.

Requests go out as plain JSON through the kubernetes client's transport (its auth, TLS and
kubeconfig handling), without its model classes: the builders already produce JSON, and validating
every pod through the client's models costs time and refuses valid objects (integer quantities).

Creates tolerate 409 (the object exists: a retry, a second event or a restarted operator), so every
caller can simply ask again. Errors come back as two kinds: the object can never be accepted as
built (the spec must change), or the request may pass later. Only the API server's answers and
network failures (`NETWORK_ERRORS`) are errors of the API; anything else raised while sending is a
bug and surfaces as itself, with its traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes import client
from urllib3.exceptions import HTTPError

from disttrain_core.api import tfjob
from disttrain_core.api.job import PLURAL
from disttrain_core.types import Manifest
from disttrain_operator.runtime import metrics

HTTP_CONFLICT = 409
HTTP_NOT_FOUND = 404
HTTP_FORBIDDEN = 403
HTTP_GONE = 410
HTTP_UNPROCESSABLE = 422
_PERMANENT = {400, 422}
_CORE_CLUSTER_PLURALS = {"Node": "nodes", "Namespace": "namespaces"}
_CORE_PLURALS = {
    "Pod": "pods",
    "Service": "services",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "ConfigMap": "configmaps",
    "Event": "events",
}
# Their group and version come with the manifest.
_CUSTOM_PLURALS = {
    "Deployment": "deployments",
    "NetworkPolicy": "networkpolicies",
    "PodGroup": "podgroups",
    "Workload": "workloads",
    "Lease": "leases",
    "DistTrainJob": PLURAL,
    tfjob.KIND: tfjob.PLURAL,
}
POD_PATH = "/api/v1/namespaces/{namespace}/pods/{name}"
_CONNECT_TIMEOUT = 30.0
_LOG_READ_TIMEOUT = 60.0  # a node that stops sending a log that has ended has failed
_FOLLOW_READ_TIMEOUT = 600.0  # a container stopping may be silent a while (a checkpoint saved on SIGTERM)
REQUEST_TIMEOUT = (_CONNECT_TIMEOUT, 60.0)
# Connection refused or reset, timeouts, TLS, a broken response: urllib3's errors and the OS's.
NETWORK_ERRORS = (HTTPError, OSError)
_CHUNK = 1 << 16


class ChildRejectedError(Exception):
    """The API server refuses the object as built from the spec: retrying cannot help."""


class InvalidWriteError(Exception):
    """The API server refuses a write as invalid (400, 422): the same write can never pass."""


class TransientApiError(Exception):
    """The request failed in a way that may pass later (network, 5xx, quota, missing ServiceAccount)."""


class LogUnreadableError(Exception):
    """The API server answered a log request with an error: no container to read, or a node that cannot serve it."""


class NotServedError(TransientApiError):
    """A listing the API server does not serve, or not to the operator (404, 403): a CRD not installed yet,
    or rights not granted yet."""


class ResourceExpiredError(TransientApiError):
    """The API server no longer has the resourceVersion or continue token asked for (410 Gone, after etcd's
    compaction): a watch must list again, not retry the same version."""


def watch_error(code: int, message: str) -> TransientApiError:
    """What a list or watch answered with `code` means: list again after a 410, else try again later."""
    return (ResourceExpiredError if code == HTTP_GONE else TransientApiError)(message)


class Kube:
    def __init__(self, api_client: client.ApiClient, timeout: tuple[float, float] = REQUEST_TIMEOUT) -> None:
        """`timeout`: (connect, read) seconds of every request that names none of its own: a request that hangs
        must not hold a reconcile, a log keeper or a lease renewal for ever."""
        self._api = api_client
        self._timeout = timeout

    def with_timeout(self, seconds: float) -> Kube:
        """The same client, each request given at most `seconds` to connect and as long to read."""
        return Kube(self._api, timeout=(seconds, seconds))

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
            method, url, headers, payload, _ = self._api.param_serialize(
                method=method,
                resource_path=path,
                path_params=params,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            return self._api.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=timeout or self._timeout
            )
        except NETWORK_ERRORS as error:
            metrics.API_ERRORS.labels(method).inc()
            raise TransientApiError(f"{method} {path}: {error}") from error

    def request(self, method: str, path: str, params: dict[str, str], body: Any, **options: Any) -> tuple[int, str]:
        """Any request and its whole answer: status code and text. `options` as for `_send`."""
        response = self._send(method, path, params, body, **options)
        try:
            response.read()
        except NETWORK_ERRORS as error:
            metrics.API_ERRORS.labels(method).inc()
            raise TransientApiError(f"{method} {path}: {error}") from error
        if response.status >= 300 and response.status not in (HTTP_CONFLICT, HTTP_NOT_FOUND, HTTP_GONE):
            metrics.API_ERRORS.labels(method).inc()
        return response.status, (response.data or b"").decode(errors="replace")

    def create(self, manifest: Manifest) -> bool:
        """Create the object; False if it already existed."""
        path = _collection(manifest)
        status, text = self.request("POST", path, {"namespace": manifest["metadata"].get("namespace", "")}, manifest)
        if status == HTTP_CONFLICT:
            return False
        if status in _PERMANENT or _refused_by_policy(status, text):
            raise ChildRejectedError(status_message(status, text))
        if status == HTTP_NOT_FOUND and _unserved(text):
            served = f"{manifest['apiVersion']} {path.rsplit('/', 1)[-1]}"
            raise ChildRejectedError(f"the cluster does not serve {served} ({status_message(status, text)})")
        if status >= 300:
            raise TransientApiError(status_message(status, text))
        return True

    def _delete(self, path: str, namespace: str, name: str, grace_seconds: int | None = None) -> bool:
        """Delete; False if it was already gone. Children go with the job through the garbage collector."""
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        status, text = self.request("DELETE", path, {"namespace": namespace, "name": name}, body)
        if status == HTTP_NOT_FOUND:
            return False
        if status >= 300:
            raise TransientApiError(status_message(status, text))
        return True

    def delete_pod(self, namespace: str, name: str, force: bool = False) -> bool:
        """`force` removes the pod without its kubelet's confirmation (a node that stopped reporting)."""
        return self._delete(POD_PATH, namespace, name, grace_seconds=0 if force else None)

    def delete_job(self, job: Mapping[str, Any]) -> bool:
        """A DistTrainJob or a served TFJob, addressed by its apiVersion, kind and metadata."""
        path, params = _object_path(job)
        return self._delete(path, params["namespace"], params["name"])

    def _patch(
        self, path: str, params: dict[str, str], body: Any, content_type: str, query: dict[str, str] | None = None
    ) -> None:
        code, text = self.request("PATCH", path, params, body, content_type=content_type, query=query)
        if code in _PERMANENT:
            raise InvalidWriteError(status_message(code, text))
        if code >= 300:
            raise TransientApiError(status_message(code, text))

    def patch_job_status(self, job: Mapping[str, Any], status: dict[str, Any]) -> None:
        self.patch_object_status(job, {"status": status})

    def patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        """A JSON merge patch of the job itself (Kueue's suspend and pod set changes)."""
        path, params = _object_path(job)
        self._patch(path, params, patch, "application/merge-patch+json")

    def patch_object_status(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> None:
        """A JSON merge patch of an object's status subresource (a job's status, a Workload's released quota)."""
        path, params = _object_path(manifest)
        self._patch(f"{path}/status", params, patch, "application/merge-patch+json")

    def apply_status_condition(self, manifest: Manifest, condition: dict[str, Any], field_manager: str) -> None:
        """Server-side apply of one condition to an object's status: other owners' conditions stay."""
        metadata = manifest["metadata"]
        path = f"{_collection(manifest)}/{{name}}/status"
        body = {
            "apiVersion": manifest["apiVersion"],
            "kind": manifest["kind"],
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
            "status": {"conditions": [condition]},
        }
        params = {"namespace": metadata["namespace"], "name": metadata["name"]}
        query = {"fieldManager": field_manager, "force": "true"}
        self._patch(path, params, body, "application/apply-patch+yaml", query=query)

    def list_items(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.list_page(path, query).get("items") or []
        return items

    def list_page(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        """A list as the API server answers it: items, and metadata with resourceVersion and continue."""
        code, text = self.request("GET", path, {}, None, query=query)
        if code in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
            raise NotServedError(status_message(code, text))
        if code >= 300:
            raise watch_error(code, status_message(code, text))
        page: dict[str, Any] = json.loads(text)
        return page

    def stream_lines(self, path: str, query: dict[str, str], read_timeout: float) -> Iterator[bytes]:
        """The lines of a long GET (a watch) as they arrive, each read once and not kept."""
        response = self._send("GET", path, {}, None, query=query, timeout=(_CONNECT_TIMEOUT, read_timeout))
        raw = response.response
        try:
            if response.status >= 300:
                raise watch_error(response.status, status_message(response.status, raw.read().decode(errors="replace")))
            pending = b""
            for chunk in raw.stream(_CHUNK):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                yield from (line for line in lines if line.strip())
        except NETWORK_ERRORS as error:  # the connection broke or went quiet past read_timeout
            raise TransientApiError(f"GET {path}: {error}") from error
        finally:
            raw.release_conn()

    def pod_log_chunks(self, namespace: str, name: str, container: str, *, follow: bool = False) -> Iterator[bytes]:
        """A container's whole log as it arrives, in chunks, and with `follow` what it writes until it ends;
        LogUnreadableError when the API server cannot give it."""
        path, params = f"{POD_PATH}/log", {"namespace": namespace, "name": name}
        query = {"container": container, **({"follow": "true"} if follow else {})}
        read_timeout = _FOLLOW_READ_TIMEOUT if follow else _LOG_READ_TIMEOUT
        response = self._send("GET", path, params, None, query=query, timeout=(_CONNECT_TIMEOUT, read_timeout))
        raw = response.response
        try:
            if response.status >= 300:
                raise LogUnreadableError(status_message(response.status, raw.read().decode(errors="replace")))
            yield from raw.stream(_CHUNK)
        except NETWORK_ERRORS as error:
            raise TransientApiError(f"GET {path}: {error}") from error
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
            raise TransientApiError(status_message(code, text))
        return True

    def list_metadata(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """The objects' metadata only (a list of PartialObjectMetadata), for lists whose objects are large."""
        accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        response = self._send("GET", path, {}, None, query=query, accept=accept)
        try:
            response.read()
        except NETWORK_ERRORS as error:
            raise TransientApiError(f"GET {path}: {error}") from error
        text = (response.data or b"").decode(errors="replace")
        if response.status >= 300:
            raise TransientApiError(status_message(response.status, text))
        items: list[dict[str, Any]] = json.loads(text).get("items") or []
        return items

    def merge_patch(self, manifest: Mapping[str, Any], patch: dict[str, Any]) -> bool:
        """A JSON merge patch of any namespaced object; False when it is gone."""
        path, params = _object_path(manifest)
        code, text = self.request("PATCH", path, params, patch, content_type="application/merge-patch+json")
        if code == HTTP_NOT_FOUND:
            return False
        if code >= 300:
            raise TransientApiError(status_message(code, text))
        return True

    def delete_object(self, manifest: Mapping[str, Any]) -> bool:
        """Delete a namespaced object of a core kind; False if it was already gone."""
        path, params = _object_path(manifest)
        return self._delete(path, params["namespace"], params["name"])

    def pod_log(self, namespace: str, name: str, tail: int | None = None) -> str:
        query = {"tailLines": str(tail)} if tail is not None else {}
        return self.get_text(f"{POD_PATH}/log", {"namespace": namespace, "name": name}, query)

    def get_text(self, path: str, params: dict[str, str], query: dict[str, str] | None = None) -> str:
        """A GET whose answer is text, not an object: a pod's log, the API server's own /metrics."""
        code, text = self.request("GET", path, params, None, query=query)
        if code >= 300:
            raise TransientApiError(status_message(code, text))
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
            raise TransientApiError(status_message(code, text))
        return True

    def read(self, path: str, params: dict[str, str]) -> dict[str, Any] | None:
        """GET one object; None when it does not exist."""
        code, text = self.request("GET", path, params, None)
        if code == HTTP_NOT_FOUND:
            return None
        if code >= 300:
            raise TransientApiError(status_message(code, text))
        found: dict[str, Any] = json.loads(text)
        return found


def _object_path(manifest: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    metadata = manifest["metadata"]
    return f"{_collection(manifest)}/{{name}}", {"namespace": metadata["namespace"], "name": metadata["name"]}


def _collection(manifest: Mapping[str, Any]) -> str:
    kind = manifest["kind"]
    if kind in _CORE_CLUSTER_PLURALS:
        return f"/api/v1/{_CORE_CLUSTER_PLURALS[kind]}"
    if kind in _CORE_PLURALS:
        return f"/api/v1/namespaces/{{namespace}}/{_CORE_PLURALS[kind]}"
    return f"/apis/{manifest['apiVersion']}/namespaces/{{namespace}}/{_CUSTOM_PLURALS[kind]}"


# Admission refusing the object as built, not the operator's rights or a full quota, which can pass later.
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


def status_message(status: int, text: str) -> str:
    """The API server's own message from a Status body, else the raw text."""
    try:
        message = str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        message = text
    return f"{status}: {message.strip()[:500]}"
