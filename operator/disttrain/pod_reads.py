"""One pod read by name and waited on by a watch from the version of that read: how the log reader follows a
replica's pod and the volume's log reader waits for its own pod to end."""

from __future__ import annotations

from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from disttrain.calls import read_json


def read_pod(core: client.CoreV1Api, namespace: str, name: str, *, what: str) -> tuple[dict[str, Any] | None, str]:
    """The pod (None if there is none) and the resourceVersion of the read, to watch on from."""
    listing = read_json(
        lambda: core.list_namespaced_pod(namespace, field_selector=f"metadata.name={name}", _preload_content=False),
        what=what,
    )
    items = listing.get("items") or []
    return (items[0] if items else None), listing["metadata"]["resourceVersion"]


def wait_for_pod_change(core: client.CoreV1Api, namespace: str, name: str, version: str, seconds: int) -> None:
    """Until the pod changes (or appears) after `version`, or `seconds` pass."""
    stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_pod,
        namespace,
        field_selector=f"metadata.name={name}",
        resource_version=version,
        timeout_seconds=seconds,
    )
    try:
        for _ in stream:
            return
    except ApiException:  # an expired version: reading the pod again is the answer
        return
