"""The API calls of a kubelet, for the process node and the benchmarks, which play its part on the
local cluster: node and pod status, the node's Lease, and the last word on a deleted pod."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from disttrain_contract.timestamps import format_micro_time
from disttrain_kube.api_errors import HTTP_CONFLICT, HTTP_NOT_FOUND, error_for
from disttrain_kube.rest import POD_PATH, Kube
from disttrain_operator.leases import read_lease, write_lease

NODE_LEASE_NAMESPACE = "kube-node-lease"


class KubeletApi(Kube):
    def patch_status(self, path: str, status: dict[str, Any]) -> bool:
        """Merge-patch an object's status; False when the object is gone."""
        code, text = self.request("PATCH", path, {}, {"status": status}, content_type="application/merge-patch+json")
        if code == HTTP_NOT_FOUND:
            return False
        if code >= 300:
            raise error_for(code, text)
        return True

    def confirm_pod_deletion(self, namespace: str, name: str, uid: str) -> None:
        """Remove a pod for good once its processes ended (a kubelet's last word on it); gone is fine."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        code, text = self.request("DELETE", POD_PATH, {"namespace": namespace, "name": name}, body)
        if code >= 300 and code not in (HTTP_NOT_FOUND, HTTP_CONFLICT):  # 409: a newer pod took the name
            raise error_for(code, text)

    def renew_node_lease(self, node: str, seconds: int) -> None:
        """The node's heartbeat in kube-node-lease, created on first use; a lost race waits for the next beat."""
        spec = {
            "holderIdentity": node,
            "leaseDurationSeconds": seconds,
            "renewTime": format_micro_time(datetime.now(UTC)),
        }
        write_lease(self, NODE_LEASE_NAMESPACE, node, spec, read_lease(self, NODE_LEASE_NAMESPACE, node))
