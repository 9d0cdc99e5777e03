"""A core/v1 Event about a job: what `kubectl describe` and `kubectl get events` show of the operator's work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disttrain_core.types import Manifest

COMPONENT = "disttrain-operator"
MESSAGE_LIMIT = 1024  # events.k8s.io/v1 caps a note at this; core/v1 Events are held to it too


def event_manifest(
    involved: Mapping[str, Any], *, type: str, reason: str, message: str, now: str, instance: str
) -> Manifest:
    """An Event of `involved` (a job, by its apiVersion, kind and metadata), first and last seen `now`;
    named after the job as the API server's own controllers name theirs."""
    metadata = involved["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{metadata['name']}.", "namespace": metadata["namespace"]},
        "involvedObject": {
            "apiVersion": involved["apiVersion"],
            "kind": involved["kind"],
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
        },
        "type": type,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
