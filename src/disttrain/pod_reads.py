"""One pod read by name and waited on by a watch from the version of that read: how the log reader follows a
replica's pod and the volume's log reader waits for its own pod to end."""

from __future__ import annotations

from typing import Any

from disttrain.calls import call
from disttrain_kube.api_errors import KubeApiError
from disttrain_kube.rest import PODS_PATH, WATCH_SILENCE_MARGIN, Kube, watch_events


def read_pod(kube: Kube, namespace: str, name: str, *, what: str) -> tuple[dict[str, Any] | None, str]:
    """The pod (None if there is none) and the resourceVersion of the read, to watch on from."""
    query = {"fieldSelector": f"metadata.name={name}"}
    listing = call(lambda: kube.json_request("GET", PODS_PATH, {"namespace": namespace}, query=query), what=what)
    items = listing.get("items") or []
    return (items[0] if items else None), listing["metadata"]["resourceVersion"]


def wait_for_pod_change(kube: Kube, namespace: str, name: str, version: str, seconds: int) -> None:
    """Until the pod changes (or appears) after `version`, or `seconds` pass."""
    query = {
        "watch": "true",
        "fieldSelector": f"metadata.name={name}",
        "resourceVersion": version,
        "timeoutSeconds": str(seconds),
    }
    lines = kube.stream_lines(PODS_PATH, query, seconds + WATCH_SILENCE_MARGIN, params={"namespace": namespace})
    try:
        for _ in watch_events(lines):
            return
    except KubeApiError:  # an expired version, or a broken watch: reading the pod again is the answer
        return
