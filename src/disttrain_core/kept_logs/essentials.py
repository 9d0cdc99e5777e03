"""What the kept logs read of a pod or of a kept log's ConfigMap, and nothing more: a tenant may give
either about a megabyte of labels and annotations, and what the operator holds of them (an ended
pod waiting for its log, a replica's kept logs, a page of the sweep) must not grow with that.

`essentials` keeps the body's shape, so every function of this package reads it as it reads the whole."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disttrain_core import naming
from disttrain_core.api.tenant_input import JOB_GONE_SINCE, OPERATOR_POD_ANNOTATIONS
from disttrain_core.kept_logs.names import (
    ENDED,
    EXIT_CODE,
    JOB_KIND_LABEL,
    JOB_UID_LABEL,
    KEPT_AT,
    KEPT_LOG_LABEL,
    LOG_BYTES,
    OUTLIVES_JOB_LABEL,
    POD_UID,
    STARTED,
)
from disttrain_core.types import Body

LABELS = frozenset(
    {
        naming.JOB_NAME_LABEL,
        naming.REPLICA_TYPE_LABEL,
        naming.REPLICA_INDEX_LABEL,
        KEPT_LOG_LABEL,
        JOB_UID_LABEL,
        JOB_KIND_LABEL,
        OUTLIVES_JOB_LABEL,
    }
)
ANNOTATIONS = OPERATOR_POD_ANNOTATIONS | {JOB_GONE_SINCE, POD_UID, STARTED, ENDED, EXIT_CODE, LOG_BYTES, KEPT_AT}
METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")
MOST_ENTRIES = 64  # of a pod's containers, their statuses, its owners and finalizers: a real pod's are among its first
LONGEST_VALUE = 256  # characters of a known annotation's value kept: each is a time, a number or a uid
_KEPT = ("state", "lastState", "restartCount")  # of a container's status


def essentials(body: Body) -> dict[str, Any]:
    """The body less what no kept-log function reads: the known labels and annotations (a value longer than any
    the operator writes is left out, as if absent), the first finalizers in their places, the controller, the
    containers' names and their states."""
    metadata = _mapping(body.get("metadata"))
    kept: dict[str, Any] = {key: metadata[key] for key in METADATA if key in metadata}
    if isinstance(metadata.get("finalizers"), list):
        kept["finalizers"] = metadata["finalizers"][:MOST_ENTRIES]
    kept["labels"] = _known(metadata.get("labels"), LABELS)
    annotations = _known(metadata.get("annotations"), ANNOTATIONS)
    kept["annotations"] = {
        key: value for key, value in annotations.items() if not isinstance(value, str) or len(value) <= LONGEST_VALUE
    }
    owners = metadata.get("ownerReferences")
    controllers = (
        [owner for owner in owners if isinstance(owner, Mapping) and owner.get("controller")][:1]
        if isinstance(owners, list)
        else []
    )
    if controllers:
        kept["ownerReferences"] = [dict(controllers[0])]
    slim: dict[str, Any] = {key: body[key] for key in ("apiVersion", "kind") if key in body}
    slim["metadata"] = kept
    spec, status = _mapping(body.get("spec")), _mapping(body.get("status"))
    if "containers" in spec:
        slim["spec"] = {"containers": [{"name": entry.get("name")} for entry in _entries(spec["containers"])]}
    if status:
        slim["status"] = {
            "phase": status.get("phase"),
            "containerStatuses": [
                {"name": entry.get("name"), **{key: entry[key] for key in _KEPT if key in entry}}
                for entry in _entries(status.get("containerStatuses"))
            ],
        }
    return slim


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [entry for entry in value[:MOST_ENTRIES] if isinstance(entry, Mapping)] if isinstance(value, list) else []


def _known(found: Any, keys: frozenset[str]) -> dict[str, Any]:
    return {key: found[key] for key in keys if key in found} if isinstance(found, Mapping) else {}
