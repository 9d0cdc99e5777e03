"""The names of a kept log: the ConfigMap's name, its labels and annotations, and the finalizer that earlier
versions put on pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disttrain_core.api.job import GROUP
from disttrain_core.api.spec import MAX_ATTEMPT, TRAINER_CONTAINER, trainer_container
from disttrain_core.api.tenant_input import PodRunNotes
from disttrain_core.types import Body

KEPT_LOG_LABEL = f"{GROUP}/kept-log-of"  # the replica, `worker-1`: what selects a job's kept logs
JOB_UID_LABEL = f"{GROUP}/job-uid"
JOB_KIND_LABEL = f"{GROUP}/job-kind"
OUTLIVES_JOB_LABEL = f"{GROUP}/kept-past-job"  # on those with a TTL, which `sweep` looks after
POD_UID = f"{GROUP}/pod-uid"
STARTED = f"{GROUP}/started"
ENDED = f"{GROUP}/ended"
EXIT_CODE = f"{GROUP}/exit-code"
LOG_BYTES = f"{GROUP}/log-bytes"  # how long the log was; the ConfigMap keeps its last max-bytes
KEPT_AT = f"{GROUP}/kept-at"  # microseconds: two attempts can end within one second
LOG_KEY = "log"
# Pods that earlier versions made carry it until their log is kept (`pods.release_patch` lets them go).
LEGACY_LOG_FINALIZER = f"{GROUP}/keep-log"


def logged_container(pod: Body) -> str:
    """The container whose log is kept: the TensorFlow one (named so where the body names no container)."""
    containers = (pod.get("spec") or {}).get("containers") or [{"name": TRAINER_CONTAINER}]
    return str(trainer_container(containers).get("name"))


def container_status(pod: Body) -> Mapping[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((entry for entry in statuses if entry.get("name") == logged_container(pod)), {})


def run_index(pod: Body) -> int:
    """Which run of its container the pod's log is, in a pod that restarts in place
    (`disttrain_core.restarts.in_place`): each run is an attempt of its own. 0 in any other pod."""
    if PodRunNotes.of(pod.get("metadata")).counted is None:
        return 0
    restarts = container_status(pod).get("restartCount")
    return restarts if isinstance(restarts, int) and 0 <= restarts <= MAX_ATTEMPT else 0


def kept_log_name(pod: Body) -> str:
    metadata, run = pod["metadata"], run_index(pod)
    return f"{metadata['name']}-log-{str(metadata['uid'])[:8]}" + (f"-run{run}" if run else "")
