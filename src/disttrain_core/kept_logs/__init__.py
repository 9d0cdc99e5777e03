"""Kept logs: each attempt's log kept after its pod is gone, in a ConfigMap the operator writes once the
container ended (or, with `logs.destination: CheckpointVolume`, in a file the trainer writes on the
checkpoint volume). One noun for one thing: a replica's attempts are its pods, numbered as they were
made; an attempt's kept log is its record.

- `names`: the ConfigMap's name, labels and annotations;
- `record`: the record built from a pod and the tail of its log, and read back;
- `pods`: what a pod carries so that its log is kept, and when that is due;
- `policy`: what a job may keep, and the sweep of those that outlive their job;
- `essentials`: what of a pod or a kept log these read, all the operator holds of either;
- `volume`: the logs on the checkpoint volume, which a pod the builders make reads back
  (`disttrain_core.builders.log_reader_pod`).

The operator's keeper and the client's reader are thin I/O shells over these.
"""

from disttrain_core.kept_logs.essentials import essentials
from disttrain_core.kept_logs.names import (
    ENDED,
    EXIT_CODE,
    JOB_KIND_LABEL,
    JOB_UID_LABEL,
    KEPT_AT,
    KEPT_LOG_LABEL,
    LEGACY_LOG_FINALIZER,
    LOG_BYTES,
    LOG_KEY,
    OUTLIVES_JOB_LABEL,
    POD_UID,
    STARTED,
    container_status,
    kept_log_name,
    logged_container,
    run_index,
)
from disttrain_core.kept_logs.pods import (
    container_ended,
    held_by_legacy_finalizer,
    keeps_log,
    latest_unkept,
    log_due,
    max_bytes,
    outlives_job,
    pod_annotations,
    previous_run,
    previous_run_due,
    release_patch,
    started,
    to_follow,
)
from disttrain_core.kept_logs.policy import (
    KEPT_ATTEMPTS_PER_REPLICA,
    KEPT_BYTES_PER_JOB,
    Sweep,
    gone_since_patch,
    kept_bytes_per_attempt,
    sweep,
)
from disttrain_core.kept_logs.record import (
    KeptLogRecord,
    LogTail,
    attempt_numbers,
    controller,
    in_order,
    kept_log,
    kept_log_selector,
    log_tail,
    next_attempt,
    pod_attempt,
    replica_of,
    surplus,
    unkept_before,
)
from disttrain_core.kept_logs.volume import trainer_env, volume_log_dir

__all__ = [
    "ENDED",
    "EXIT_CODE",
    "JOB_KIND_LABEL",
    "JOB_UID_LABEL",
    "KEPT_AT",
    "KEPT_ATTEMPTS_PER_REPLICA",
    "KEPT_BYTES_PER_JOB",
    "KEPT_LOG_LABEL",
    "LEGACY_LOG_FINALIZER",
    "LOG_BYTES",
    "LOG_KEY",
    "OUTLIVES_JOB_LABEL",
    "POD_UID",
    "STARTED",
    "KeptLogRecord",
    "LogTail",
    "Sweep",
    "attempt_numbers",
    "container_ended",
    "container_status",
    "controller",
    "essentials",
    "gone_since_patch",
    "held_by_legacy_finalizer",
    "in_order",
    "keeps_log",
    "kept_bytes_per_attempt",
    "kept_log",
    "kept_log_name",
    "kept_log_selector",
    "latest_unkept",
    "log_due",
    "log_tail",
    "logged_container",
    "max_bytes",
    "next_attempt",
    "outlives_job",
    "pod_annotations",
    "pod_attempt",
    "previous_run",
    "previous_run_due",
    "release_patch",
    "replica_of",
    "run_index",
    "started",
    "surplus",
    "sweep",
    "to_follow",
    "trainer_env",
    "unkept_before",
    "volume_log_dir",
]
