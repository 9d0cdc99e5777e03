"""Lease objects (coordination.k8s.io/v1), read and written in one place: the operator's leader
election and the process node's heartbeat both go through here.

A write names the resourceVersion it read, so of two writers racing for one Lease exactly one wins.
"""

from __future__ import annotations

from typing import Any

from disttrain_kube.rest import Kube

LEASE_API = "coordination.k8s.io/v1"
_LEASE = f"/apis/{LEASE_API}/namespaces/{{namespace}}/leases/{{name}}"


def read_lease(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    """The Lease as stored; None when there is none."""
    return kube.read(_LEASE, {"namespace": namespace, "name": name})


def write_lease(kube: Kube, namespace: str, name: str, spec: dict[str, Any], read: dict[str, Any] | None) -> bool:
    """Create the Lease (`read` is None) or replace the one read; False when someone else wrote it first."""
    if read is None:
        metadata = {"name": name, "namespace": namespace}
        return kube.create({"apiVersion": LEASE_API, "kind": "Lease", "metadata": metadata, "spec": spec})
    return kube.replace(_LEASE, {"namespace": namespace, "name": name}, {**read, "spec": spec})
