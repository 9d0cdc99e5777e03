"""What the operator watches, and the view it keeps of each object: its jobs (and served TFJobs), which
kopf watches and indexes, as the reconcile reads them; and on its own watches its pods as `PodView`s,
its Services by name, its PVCs as `ClaimView`s, Kueue's Workloads as `WorkloadView`s, TensorBoard Deployments as
`TensorBoardView`s. Children are the objects labelled
with their job's name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from disttrain_core import held
from disttrain_core.api import tfjob
from disttrain_core.api.job import GROUP, PLURAL, VERSION
from disttrain_core.claims import ClaimView, claim_view
from disttrain_core.kueue import WORKLOAD_API_VERSION, WorkloadView, read_annotations, read_labels, workload_view
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_core.observed import PodView, pod_view
from disttrain_core.tensorboard_status import TensorBoardView, tensorboard_view
from disttrain_core.types import Body, JobKey, ObjectRef
from disttrain_operator.watch import Found, WatchedResource

PROJECTED = "projected"  # a held job's key, True where its templates were left out (`disttrain_core.held`)


def job_body(body: Mapping[str, Any], *, whole: bool = False) -> dict[str, Any]:
    """The parts of a job the operator reads (no managedFields, no resourceVersion, none of a tenant's labels but
    Kueue's): an event that changes none of them changes nothing kept. A job over `held.HELD_JOB_BYTES` is held
    without its pod templates, marked PROJECTED, unless `whole`; a reconcile reads it whole (`IndexedJobs.whole`)."""
    metadata = body.get("metadata") or {}
    kept = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
            "generation": metadata.get("generation"),
            "creationTimestamp": metadata.get("creationTimestamp"),
            "labels": read_labels(metadata.get("labels")),
            "annotations": read_annotations(metadata.get("annotations")),
            **({"deletionTimestamp": metadata["deletionTimestamp"]} if metadata.get("deletionTimestamp") else {}),
        },
        "spec": dict(body.get("spec") or {}),
        "status": dict(body.get("status") or {}),
    }
    found = None if whole else held.projected(kept)
    return kept if found is None else {**found, PROJECTED: True}


def job_path(body: Body) -> str:
    """The API path of a held job, of either kind."""
    metadata = body["metadata"]
    plural = tfjob.PLURAL if body.get("kind") == tfjob.KIND else PLURAL
    return f"/apis/{body['apiVersion']}/namespaces/{metadata['namespace']}/{plural}/{metadata['name']}"


def _uid(body: Mapping[str, Any]) -> str | None:
    uid = (body.get("metadata") or {}).get("uid")
    return uid if isinstance(uid, str) and uid else None


def _owner(body: Mapping[str, Any]) -> tuple[JobKey, str] | None:
    """The job of a labelled child, and the child's uid."""
    metadata, uid = body.get("metadata") or {}, _uid(body)
    job = (metadata.get("labels") or {}).get(JOB_NAME_LABEL)
    return None if job is None or uid is None else ((str(metadata.get("namespace", "")), str(job)), uid)


def _pod(body: dict[str, Any]) -> Found[PodView] | None:
    owner, view = _owner(body), pod_view(body)
    return None if owner is None or view is None else (*owner, view)


def _child(kind: str) -> Callable[[dict[str, Any]], Found[ObjectRef] | None]:
    def found(body: dict[str, Any]) -> Found[ObjectRef] | None:
        owner = _owner(body)
        return None if owner is None else (*owner, ObjectRef(kind, str(body["metadata"].get("name"))))

    return found


def _claim(body: dict[str, Any]) -> Found[ClaimView] | None:
    owner = _owner(body)
    return None if owner is None else (*owner, claim_view(body))


def _tensorboard(body: dict[str, Any]) -> Found[TensorBoardView] | None:
    owner = _owner(body)
    return None if owner is None else (*owner, tensorboard_view(body))


def _workload(body: dict[str, Any]) -> Found[WorkloadView] | None:
    owner = _owner(body)
    return None if owner is None else (*owner, workload_view(body))


@dataclass(frozen=True)
class JobKind:
    """A kind of job kopf watches, and the id of its index (also the keyword its handlers get it by)."""

    group: str
    version: str
    plural: str
    index: str

    def path(self, namespace: str | None) -> str:
        within = "" if namespace is None else f"/namespaces/{namespace}"
        return f"/apis/{self.group}/{self.version}{within}/{self.plural}"


# Jobs per page of kopf's listing, at the operator's start: a tenant's job may be 2.5 MB with its managedFields,
# about 20 MiB parsed, and a page is parsed whole.
JOB_PAGE = 10
DISTTRAIN_JOBS = JobKind(GROUP, VERSION, PLURAL, "disttrainjobs")
SERVED_TFJOBS = JobKind(tfjob.GROUP, tfjob.VERSION, tfjob.PLURAL, "served_tfjobs")
PODS = WatchedResource("api/v1", "pods", _pod, selector=JOB_NAME_LABEL)
SERVICES = WatchedResource("api/v1", "services", _child("Service"), selector=JOB_NAME_LABEL)
CLAIMS = WatchedResource("api/v1", "persistentvolumeclaims", _claim, selector=JOB_NAME_LABEL)
TENSORBOARDS = WatchedResource("apis/apps/v1", "deployments", _tensorboard, selector=JOB_NAME_LABEL)
WORKLOADS = WatchedResource(
    f"apis/{WORKLOAD_API_VERSION}", "workloads", _workload, selector=JOB_NAME_LABEL, optional=True
)
