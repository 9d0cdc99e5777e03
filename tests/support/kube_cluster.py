"""The local cluster as the tests reach it: kubectl with a kubeconfig (`Cluster`), and kubeconfigs for an
account's token (the operator's, a tenant's).

A test reads objects again and again while it waits (every 0.2 s): `get` and `items` ask the API server
from this process, on a connection kept per kubeconfig, with kubectl's names for kinds, since a kubectl
process costs about 120 ms of CPU per read against about 0.9 ms here (measured on the 2-core CI machine),
and those reads ran beside the trainers they wait for. So do the writes every test makes (its namespace
made and deleted, a pod's status as a kubelet writes it, an eviction)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from disttrain_dev.polling import wait_for
from disttrain_dev.versions import cache_paths
from disttrain_kube.api_errors import HTTP_CONFLICT, HTTP_NOT_FOUND, NETWORK_ERRORS, KubeApiError
from disttrain_kube.connection import connect
from disttrain_kube.resources import group_path, is_subresource
from disttrain_kube.rest import Kube
from support.repository import ROOT

OPERATOR_TEST_NAMESPACE = "disttrain-operator-under-test"
GRACE = {"gracePeriodSeconds": "1"}  # how long a test namespace's pods get to end as it goes


@dataclass(frozen=True)
class Cluster:
    kubeconfig: Path

    @property
    def state_folder(self) -> Path:
        """The control plane's folder (`disttrain_dev.cluster.state_dir`), where its kubeconfig lies."""
        return self.kubeconfig.parent

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(cache_paths().binary("kubectl")), *args]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, env=self.env, check=False)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result

    def create_namespace(self, namespace: str | dict[str, Any], exist_ok: bool = False) -> None:
        """Create the namespace of this name, or this Namespace object (`exist_ok`: unless one of its name
        exists)."""
        if isinstance(namespace, str):
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        code, text = self._write("POST", "/api/v1/namespaces", namespace)
        if code >= 300 and not (exist_ok and code == HTTP_CONFLICT):
            raise AssertionError(f"creating namespace {namespace['metadata']['name']} failed: {code} {text}")

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace, and wait until its pods are gone: the next test finds the nodes free. Its
        other content goes meanwhile: the namespace controller starts 5 s after a deletion (time for every
        API server to see it) and looks again 5 s later while pods remain, where a pod deleted goes at
        once. Its pods get 1 s to end: a container that ignores SIGTERM (a `sleep`, a trainer held back from
        its restart) held a test's teardown for its whole 30 s grace period, three times a CI run. No object
        can be made in it once deleting."""
        for path, query in ((f"/api/v1/namespaces/{name}", None), (f"/api/v1/namespaces/{name}/pods", GRACE)):
            code, text = self._write("DELETE", path, None, query)
            if code >= 300 and code != HTTP_NOT_FOUND:
                raise AssertionError(f"deleting {path} failed: {code} {text}")
        wait_for(f"the pods of namespace {name} gone", lambda: not self.items("pods", name), timeout=120)

    def _write(
        self, method: str, path: str, body: Any, query: dict[str, str] | None = None, content_type: str | None = None
    ) -> tuple[int, str]:
        """A request of this process on the kept connection: its status code and text."""
        options = {"content_type": content_type} if content_type else {}
        return _reader(self.kubeconfig).kube.request(method, path, {}, body, query=query, **options)

    def get(self, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The object as `kubectl get KIND NAME -o json` shows it; None where kubectl would fail (absent,
        forbidden, the API server unreachable)."""
        try:
            reader = _reader(self.kubeconfig)
            path, _ = reader.path(kind, namespace)
            code, text = reader.kube.request("GET", f"{path}/{name}", {}, None)
        except (KubeApiError, *NETWORK_ERRORS):
            return None
        return json.loads(text) if code < 300 else None

    def items(self, kind: str, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        """`kubectl get KIND [-l SELECTOR] -o json`'s items, each with its apiVersion and kind as kubectl
        fills them in."""
        reader = _reader(self.kubeconfig)
        path, kind_name = reader.path(kind, namespace)
        query = {"labelSelector": selector} if selector else None
        listed = reader.kube.json_request("GET", path, {}, query=query)
        return [{"apiVersion": listed["apiVersion"], "kind": kind_name, **item} for item in listed["items"]]

    def set_pod_status(
        self,
        namespace: str,
        name: str,
        phase: str,
        exit_code: int | None = None,
        message: str | None = None,
        *,
        finished_at: str | None = None,
    ) -> None:
        """Play the kubelet: end a pod with a phase, the tensorflow container's exit code, termination message
        and end time."""
        status: dict[str, Any] = {"phase": phase}
        if exit_code is not None:
            terminated: dict[str, Any] = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}
            if message is not None:
                terminated["message"] = message
            if finished_at is not None:
                terminated["finishedAt"] = finished_at
            status["containerStatuses"] = [
                {
                    "name": "tensorflow",
                    "image": "disttrain/trainer:0.1.0",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"terminated": terminated},
                }
            ]
        self.patch_pod_status(namespace, name, status)

    def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        code, text = self._write("PATCH", path, {"status": status}, content_type="application/merge-patch+json")
        if code >= 300:
            raise AssertionError(f"patching {path} failed: {code} {text}")

    def evict(self, namespace: str, name: str) -> None:
        """Evict a pod through the Eviction API, as `kubectl drain` and the cluster autoscaler do."""
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        code, text = self._write("POST", path, eviction)
        if code >= 300:
            raise AssertionError(f"evicting {namespace}/{name} failed: {code} {text}")

    def apply(self, namespace: str, text: str) -> None:
        self.kubectl("apply", "-n", namespace, "-f", "-", stdin=text)

    def create_claim(self, namespace: str, name: str) -> None:
        """An existing PVC, as a job's `checkpoint.claimName` expects (the parameter server example's)."""
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        }
        self.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(claim))

    def job_pods(self, namespace: str, job: str) -> dict[str, dict[str, Any]]:
        return {pod["metadata"]["name"]: pod for pod in self.items("pods", namespace, f"disttrain.io/job-name={job}")}

    def has_event(self, namespace: str, reason: str) -> bool:
        return any(event["reason"] == reason for event in self.items("events", namespace))

    def wait_for_event(self, namespace: str, reason: str, timeout: float = 30) -> None:
        """Until an Event of `reason` is in the namespace: the operator posts an Event beside the status that
        says the same, so the status seen first does not mean the Event is there yet."""
        wait_for(f"an Event {reason} in {namespace}", lambda: self.has_event(namespace, reason), timeout=timeout)

    def job(self, namespace: str, name: str) -> dict[str, Any]:
        job = self.get("disttrainjob", name, namespace)
        assert job is not None, f"job {namespace}/{name} is gone"
        return job


@dataclass(frozen=True)
class KubectlKind:
    collection: str  # its path, `{namespace}` left to fill for a namespaced kind
    kind: str


REDISCOVERY_SECONDS = 1.0


class _Reader:
    """Requests as one kubeconfig's user, and kubectl's names for the kinds the API server serves: plural,
    singular, short names and kind, alone or with their group (`podgroups.scheduling.k8s.io`); the core
    group first, then the others in discovery's order, each version of a group after its preferred one,
    as kubectl chooses."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kube = Kube(connect(kubeconfig).api_client)
        self._names: dict[str, KubectlKind] = {}
        self._discovered = 0.0  # time.monotonic() of the last discovery
        self._lock = threading.Lock()

    def path(self, kind: str, namespace: str) -> tuple[str, str]:
        """The collection's path (in `namespace` where the kind is namespaced) and the kind's name; discovery
        (about 30 requests) is read again for a name not known yet (a CRD installed since), at most once a
        second while a test polls for a kind that is not served."""
        with self._lock:
            if kind.lower() not in self._names and time.monotonic() - self._discovered >= REDISCOVERY_SECONDS:
                self._names = self._discover()
                self._discovered = time.monotonic()
            found = self._names.get(kind.lower())
        if found is None:
            raise KubeApiError(HTTP_NOT_FOUND, f"the server has no resource type {kind!r}")
        return found.collection.replace("{namespace}", namespace), found.kind

    def _discover(self) -> dict[str, KubectlKind]:
        served = [("", "v1", group_path("v1"), self._resources(group_path("v1")))]
        for group in self.kube.json_request("GET", "/apis", {})["groups"]:
            preferred = group["preferredVersion"]["version"]
            for version in sorted(group["versions"], key=lambda entry: entry["version"] != preferred):
                base = group_path(version["groupVersion"])
                served.append((group["name"], version["version"], base, self._resources(base)))
        return kubectl_names(served)

    def _resources(self, base: str) -> list[dict[str, Any]]:
        try:
            resources: list[dict[str, Any]] = self.kube.json_request("GET", base, {}).get("resources") or []
        except KubeApiError:  # a group version going as its CRD is deleted
            return []
        return resources


def kubectl_names(served: list[tuple[str, str, str, list[dict[str, Any]]]]) -> dict[str, KubectlKind]:
    """Each name kubectl takes for a kind, from discovery's (group, version, path, resources) in the order
    kubectl prefers them, the first that claims a name keeping it."""
    names: dict[str, KubectlKind] = {}
    for group, version, base, resources in served:
        for entry in resources:
            if is_subresource(entry):
                continue
            scope = "/namespaces/{namespace}" if entry["namespaced"] else ""
            found = KubectlKind(f"{base}{scope}/{entry['name']}", entry["kind"])
            aliases = {
                entry["name"],
                entry.get("singularName") or "",
                entry["kind"].lower(),
                *entry.get("shortNames", []),
            }
            for alias in aliases - {""}:
                for name in (alias, f"{alias}.{group}", f"{alias}.{version}.{group}") if group else (alias,):
                    names.setdefault(name.lower(), found)
    return names


@cache
def _reader_for(kubeconfig: Path, written: int) -> _Reader:
    return _Reader(kubeconfig)


def _reader(kubeconfig: Path) -> _Reader:
    """One reader per kubeconfig, made again where the file was rewritten (a cluster brought up again)."""
    return _reader_for(kubeconfig, kubeconfig.stat().st_mtime_ns)


def operator_kubeconfig(cluster: Cluster, folder: Path, rbac: Path = ROOT / "deploy" / "rbac.yaml") -> Path:
    """Credentials of the operator's own ServiceAccount with deploy/rbac.yaml's rules (or another file's,
    such as an overlay's additions), not an admin's."""
    return account_kubeconfig(cluster, folder, rbac, "disttrain-operator")


def serving_operator_kubeconfig(cluster: Cluster, folder: Path) -> Path:
    """The operator's credentials with deploy/rbac.yaml's rules and the TFJob overlay's additions, as an
    install that serves TFJobs grants them."""
    kubeconfig = operator_kubeconfig(cluster, folder)
    operator_kubeconfig(cluster, folder / "tfjobs", ROOT / "overlays" / "serve-tfjobs" / "rbac.yaml")
    return kubeconfig


@contextmanager
def admission_policy_installed(cluster: Cluster) -> Iterator[None]:
    """deploy/'s admission policy on the cluster, as an install makes it, for the block's length."""
    policy = str(ROOT / "deploy" / "admission" / "policy.yaml")
    cluster.kubectl("apply", "--server-side", "-f", policy)
    try:
        yield
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "-f", policy)


def account_kubeconfig(
    cluster: Cluster, folder: Path, rbac: Path, account: str, namespace: str = OPERATOR_TEST_NAMESPACE
) -> Path:
    """Credentials of `account`, a ServiceAccount with the rules of an RBAC file of deploy/.

    The cluster-wide objects are the file's, renamed, and the namespaced ones (the ServiceAccount and
    any Role) move to `namespace`, so that tests installing deploy/ itself leave them alone.
    """
    cluster.create_namespace(namespace, exist_ok=True)
    apply_rbac(cluster, rbac, namespace, namespace)
    return token_kubeconfig(cluster, folder, namespace, account)


def apply_rbac(cluster: Cluster, rbac: Path, place: str, accounts_namespace: str) -> None:
    """An RBAC file of deploy/, its namespaced objects moved to `place`, its bindings naming accounts of
    `accounts_namespace`, its cluster-wide objects renamed."""
    documents = [doc for doc in yaml.safe_load_all(rbac.read_text()) if doc]
    for document in documents:
        if document["kind"] in {"ServiceAccount", "Role", "RoleBinding"}:
            document["metadata"]["namespace"] = place
        else:
            document["metadata"]["name"] = f"{OPERATOR_TEST_NAMESPACE}-{document['metadata']['name']}"
        if document["kind"] == "ClusterRoleBinding":
            document["roleRef"]["name"] = f"{OPERATOR_TEST_NAMESPACE}-{document['roleRef']['name']}"
        if document["kind"].endswith("RoleBinding"):
            document["subjects"][0]["namespace"] = accounts_namespace
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))


def token_kubeconfig(cluster: Cluster, folder: Path, namespace: str, account: str) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount, with a token of a day."""
    token = cluster.kubectl("create", "token", account, "-n", namespace, "--duration=24h").stdout.strip()
    config = json.loads(cluster.kubeconfig.read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{account}.kubeconfig"
    path.write_text(json.dumps(config))
    return path
