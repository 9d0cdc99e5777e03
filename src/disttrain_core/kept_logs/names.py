"""The names of a kept log: the ConfigMap's name, its labels and annotations, and the finalizer that earlier
versions put on pods."""

from __future__ import annotations

from disttrain_core.api.job import GROUP
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


def kept_log_name(pod: Body) -> str:
    metadata = pod["metadata"]
    return f"{metadata['name']}-log-{str(metadata['uid'])[:8]}"
