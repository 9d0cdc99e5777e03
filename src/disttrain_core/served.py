"""TFJobs served through the same core as DistTrainJobs: a TFJob body becomes the DistTrainJob the
planner, builders and status read, and what the core decides goes back in TFJob's shape.

- spec: `tfjob_conversion.convert` (the same mapping as `disttrain convert`), so a served TFJob and
  its converted manifest behave alike;
- status: TFJob's conditions (reasons `TFJobCreated`, `TFJobRunning`, ... with disttrain's own reason
  at the start of the message, so it survives a restart of the operator), `replicaStatuses` keyed as
  the spec names the replica types (`Master` stays `Master`), `lastReconcileTime`, and disttrain's
  fields (phase, restartCount, progress) beside them;
- Kueue's patches of the job: TFJob's field names.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from disttrain_core.api import tfjob
from disttrain_core.api.status import Condition, DistTrainJobStatus, ReplicaStatus
from disttrain_core.api.tenant_input import as_list, as_mapping
from disttrain_core.tfjob_conversion import UnconvertibleError, convert, replica_type_of
from disttrain_core.types import Body, Manifest

_REASON_SEPARATOR = ": "


def is_served(body: Mapping[str, Any]) -> bool:
    return body.get("apiVersion") == tfjob.API_VERSION and body.get("kind") == tfjob.KIND


def job_manifest(body: Mapping[str, Any]) -> Manifest:
    """The DistTrainJob the core works on for a TFJob body; UnconvertibleError names a refused field."""
    converted = convert({key: value for key, value in body.items() if key != "status"}).job
    return {
        "apiVersion": tfjob.API_VERSION,
        "kind": tfjob.KIND,
        "metadata": copy.deepcopy(dict(body["metadata"])),
        "spec": converted["spec"],
        "status": core_status(body.get("status") or {}),
    }


def replica_names(body: Mapping[str, Any]) -> dict[str, str]:
    """DistTrainJob replica type -> the key the TFJob's spec uses for it (Master, lowercase ps, ...); the
    status and patches name replica types as the spec does."""
    names: dict[str, str] = {}
    for key in (body.get("spec") or {}).get("tfReplicaSpecs") or {}:
        try:
            names[replica_type_of(str(key)).value] = str(key)
        except UnconvertibleError:
            continue
    return names


def tfjob_status(status: Mapping[str, Any], names: Mapping[str, str], now: str) -> dict[str, Any]:
    """The core's status as a TFJob's: TFJob's reasons and `lastUpdateTime`, replica statuses under the
    spec's own keys, `lastReconcileTime`."""
    as_tfjob = dict(copy.deepcopy(status))
    conditions = []
    for condition in status.get("conditions") or []:
        reason, message = condition.get("reason", ""), condition.get("message", "")
        conditions.append(
            {
                **condition,
                "reason": f"{tfjob.KIND}{condition['type']}",
                "message": f"{reason}{_REASON_SEPARATOR}{message}" if reason else message,
                "lastUpdateTime": condition.get("lastTransitionTime"),
            }
        )
    as_tfjob["conditions"] = conditions
    as_tfjob["replicaStatuses"] = {
        names.get(kind, kind): value for kind, value in (status.get("replicaStatuses") or {}).items()
    }
    as_tfjob["lastReconcileTime"] = now
    return as_tfjob


# What the core's status holds; a TFJob written by training-operator (adopted) has more, such as a
# replica's labelSelector, which the core neither reads nor keeps.
_STATUS_FIELDS = frozenset(DistTrainJobStatus.model_json_schema(by_alias=True)["properties"])
_REPLICA_FIELDS = frozenset(ReplicaStatus.model_json_schema(by_alias=True)["properties"])
_CONDITION_FIELDS = frozenset(Condition.model_json_schema(by_alias=True)["properties"])


def core_status(wired: Any) -> dict[str, Any]:
    """A TFJob's status as the core reads it: the inverse of `tfjob_status`. A status of another shape (a
    TFJob's status is anyone's who may write it under another controller's CRD) reads as what it holds of
    the right shape; the core's models judge the rest."""
    wired = as_mapping(wired)
    status = {key: copy.deepcopy(value) for key, value in wired.items() if key in _STATUS_FIELDS}
    conditions = []
    for condition in map(as_mapping, as_list(wired.get("conditions"))):
        restored = {key: value for key, value in condition.items() if key in _CONDITION_FIELDS}
        message = str(condition.get("message", ""))
        if _REASON_SEPARATOR in message:
            restored["reason"], restored["message"] = message.split(_REASON_SEPARATOR, 1)
        conditions.append(restored)
    if conditions:
        status["conditions"] = conditions
    replicas = {}
    for key, value in as_mapping(wired.get("replicaStatuses")).items():
        try:
            replicas[replica_type_of(str(key)).value] = {
                k: v for k, v in as_mapping(value).items() if k in _REPLICA_FIELDS
            }
        except UnconvertibleError:
            continue
    if replicas:
        status["replicaStatuses"] = replicas
    return status


def tfjob_patch(patch: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A merge patch of the core's job (Kueue's suspend and templates) in TFJob's field names."""
    spec = dict(patch.get("spec") or {})
    if "replicaSpecs" in spec:
        spec["tfReplicaSpecs"] = {names.get(kind, kind): value for kind, value in spec.pop("replicaSpecs").items()}
    return {**patch, "spec": spec}


@dataclass(frozen=True)
class JobShape:
    """How one job is read and written: a DistTrainJob as it is, a served TFJob translated here and
    nowhere else, on its way in (`body_in`, `bare_in`, `status_in`) and out (`status_out`, `patch_out`)."""

    names: Mapping[str, str] | None = None  # a served TFJob's replica type keys (`replica_names`)

    @classmethod
    def of(cls, body: Body) -> JobShape:
        return cls(replica_names(body)) if is_served(body) else cls()

    def body_in(self, body: Body) -> Body:
        """The job as the core reads it; UnconvertibleError names a field disttrain cannot serve."""
        return body if self.names is None else job_manifest(body)

    def bare_in(self, body: Body) -> Body:
        """The job without its spec's translation, its status in the core's terms: what a job the operator
        refuses is failed with."""
        if self.names is None:
            return body
        bare = {key: body[key] for key in ("apiVersion", "kind", "metadata")}
        return {**bare, "status": core_status(body.get("status") or {})}

    def status_in(self, status: Mapping[str, Any]) -> Mapping[str, Any]:
        return status if self.names is None else core_status(status)

    def status_out(self, status: dict[str, Any], now: str) -> dict[str, Any]:
        return status if self.names is None else tfjob_status(status, self.names, now)

    def patch_out(self, patch: dict[str, Any]) -> dict[str, Any]:
        return patch if self.names is None else tfjob_patch(patch, self.names)
