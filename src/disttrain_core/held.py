"""What a long-lived view (the operator's index, a dashboard's feed) holds of a job, whatever its size.

A tenant's job may be as large as etcd takes, nearly all of it in pod templates, and Python holds several
times its JSON (docs/benchmarks.md). The views keep every job for as long as it exists and read its templates
only where pods are built: a job over HELD_JOB_BYTES is held without them, each template swapped for
PLACEHOLDER_TEMPLATE, and read whole again where pods are built. Status, Kueue and the planner's decisions
read only what is left.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from disttrain_core.api.job import DistTrainJob

HELD_JOB_BYTES = 64 * 1024  # of a job's JSON held as it is; a real job's is a few KiB
# A template that validates and builds no pod of the job's: what a held projection has in place of each.
PLACEHOLDER_TEMPLATE: dict[str, Any] = {"spec": {"containers": [{"name": "tensorflow", "image": "held-elsewhere"}]}}
REPLICA_SPECS = ("replicaSpecs", "tfReplicaSpecs")  # where a DistTrainJob's and a served TFJob's templates are


def weight(value: Any) -> int:
    """Bytes of `value` as compact JSON: what the API server sends of it."""
    return len(json.dumps(value, separators=(",", ":"), default=str))


def without_templates(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A job's raw spec (a DistTrainJob's or a TFJob's) with each replica's template swapped for the placeholder."""
    held = dict(spec)
    for field in REPLICA_SPECS:
        replicas = held.get(field)
        if isinstance(replicas, Mapping):
            held[field] = {
                name: {**replica, "template": PLACEHOLDER_TEMPLATE} if isinstance(replica, Mapping) else replica
                for name, replica in replicas.items()
            }
    return held


def projected(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """A raw job (either kind) without its templates where it weighs more than HELD_JOB_BYTES; None where not."""
    spec = body.get("spec")
    if not isinstance(spec, Mapping) or weight(body) <= HELD_JOB_BYTES:
        return None
    return {**body, "spec": without_templates(spec)}


def held_job(job: DistTrainJob) -> DistTrainJob:
    """The job as a long-lived view keeps it: as it is when its templates weigh HELD_JOB_BYTES or less, else
    with each swapped for the placeholder (`disttrain render` and the job's own page read it whole)."""
    templates = {replica_type: replica.template for replica_type, replica in job.spec.replica_specs.items()}
    if weight(templates) <= HELD_JOB_BYTES:
        return job
    replicas = {
        replica_type: replica.model_copy(update={"template": PLACEHOLDER_TEMPLATE})
        for replica_type, replica in job.spec.replica_specs.items()
    }
    return job.model_copy(update={"spec": job.spec.model_copy(update={"replica_specs": replicas})})
