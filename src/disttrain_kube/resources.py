"""Where the API server serves each kind: the path of its collection, from discovery or the models.

The kinds disttrain defines (DistTrainJob, and TFJob, which it serves) come from the API models. Any
other kind (a Pod, a Kueue Workload, a scheduler-plugins PodGroup) is looked up in the discovery
document of its group version, read once and kept: the API server says its plural and whether it is
namespaced, so no table of plurals is kept here to drift from the cluster. A group version that is
not served is asked again next time (its CRD may be installed meanwhile); so is a served one that
lacks the kind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from disttrain_core.api import job, tfjob
from disttrain_kube.api_errors import HTTP_NOT_FOUND, RefusedError


@dataclass(frozen=True)
class Served:
    plural: str
    namespaced: bool


# Discovery's answer for a group version, None when the API server does not serve it.
ReadDiscovery = Callable[[str], dict[str, Any] | None]

FROM_THE_MODELS = {
    (job.API_VERSION, job.KIND): Served(job.PLURAL, namespaced=True),
    (tfjob.API_VERSION, tfjob.KIND): Served(tfjob.PLURAL, namespaced=True),
}


class Resources:
    def __init__(self, read_discovery: ReadDiscovery) -> None:
        self._read = read_discovery
        self._served: dict[tuple[str, str], Served] = dict(FROM_THE_MODELS)
        self._lock = threading.Lock()

    def collection(self, api_version: str, kind: str, *, every_namespace: bool = False) -> str:
        """The path of the kind's collection, `{namespace}` left to fill for a namespaced kind (unless
        `every_namespace`: a listing across them); RefusedError when the cluster does not serve the kind."""
        served = self.served(api_version, kind)
        scope = "/namespaces/{namespace}" if served.namespaced and not every_namespace else ""
        return f"{group_path(api_version)}{scope}/{served.plural}"

    def served(self, api_version: str, kind: str) -> Served:
        found = self._served.get((api_version, kind))
        if found is not None:
            return found
        document = self._read(group_path(api_version))
        if document is None:
            raise RefusedError(HTTP_NOT_FOUND, f"the cluster does not serve {api_version} (so no {kind})")
        listed = {
            entry["kind"]: Served(entry["name"], bool(entry.get("namespaced")))
            for entry in document.get("resources") or []
            if not is_subresource(entry)
        }
        with self._lock:
            self._served.update({(api_version, name): served for name, served in listed.items()})
        if kind not in listed:
            raise RefusedError(HTTP_NOT_FOUND, f"the cluster does not serve {api_version} {kind}")
        return listed[kind]


def is_subresource(entry: dict[str, Any]) -> bool:
    """A discovery entry of a subresource (`pods/log`), which names its parent's kind."""
    return "/" in entry.get("name", "/")


def group_path(api_version: str) -> str:
    """Where a group version is served: the core group's v1 under /api, every other under /apis."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
