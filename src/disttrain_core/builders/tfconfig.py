"""TF_CONFIG: the cluster spec and task each TensorFlow process reads through TFConfigClusterResolver.

Where the evaluator appears follows what TensorFlow 2.21 does with it (measured on these machines;
`tests/trainer_processes/` runs the shape below with real processes):
- the training tasks (chief, worker, ps) get a cluster spec without the evaluator. A
  ParameterServerStrategy coordinator connects to every task of its cluster spec, so a listed
  evaluator, which runs no TensorFlow server, makes the chief wait forever (still waiting after
  90 s, where the same cluster without it finished in seconds); MultiWorkerMirrored
  works either way, since it coordinates only `chief` and `worker`;
- the evaluator gets the training cluster plus its own `evaluator` job, because TensorFlow reads
  `cluster_spec["evaluator"]` when the current task is the evaluator (`multi_worker_util`), and
  task `{"type": "evaluator", "index": 0}`.
So the evaluator can restart, lag or be absent without the training tasks noticing.
"""

from __future__ import annotations

import json
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import ReplicaType
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.naming import pod_name, service_name


def task_address(job: DistTrainJob, replica_type: ReplicaType, index: int, settings: BuildSettings) -> str:
    """`{pod}.{service}.{namespace}.svc[.{domain}]:{port}`: resolvable before the pod is ready."""
    host = f"{pod_name(job.metadata.name, replica_type, index)}.{service_name(job.metadata.name)}"
    host += f".{job.metadata.namespace}.svc"
    if settings.cluster_domain:
        host += f".{settings.cluster_domain}"
    return f"{host}:{job.spec.port}"


def cluster_spec(job: DistTrainJob, viewer: ReplicaType, settings: BuildSettings) -> dict[str, list[str]]:
    """The cluster as `viewer` must see it: the evaluator is listed for the evaluator alone."""
    return {
        replica_type.task_type: [
            task_address(job, replica_type, index, settings) for index in range(job.spec.replicas(replica_type))
        ]
        for replica_type in ReplicaType
        if job.spec.replicas(replica_type) > 0
        and (replica_type is not ReplicaType.EVALUATOR or viewer is ReplicaType.EVALUATOR)
    }


def tf_config(
    job: DistTrainJob, replica_type: ReplicaType, index: int, settings: BuildSettings
) -> dict[str, Any] | None:
    """None for a job of a single replica: TensorFlow then runs locally, as with no cluster at all."""
    if job.spec.total_replicas <= 1:
        return None
    return {
        "cluster": cluster_spec(job, replica_type, settings),
        "task": {"type": replica_type.task_type, "index": index},
        "environment": "cloud",
    }


class TFConfigs:
    """Every pod's TF_CONFIG of one job, its cluster written once for all of them.

    Each pod's TF_CONFIG names every task, so a job's pods carry addresses in the square of its replicas:
    written anew for each pod, they were most of a large job's build (docs/benchmarks.md). Here the two views of the
    cluster (the training tasks' and the evaluator's) are written once, and each pod's text joins one
    of them with its task: the same text as `json.dumps(tf_config(...))`, compactly separated."""

    def __init__(self, job: DistTrainJob, settings: BuildSettings) -> None:
        self._job = job
        self._settings = settings
        self._clusters: dict[bool, str] = {}  # by whether the viewer is the evaluator

    def json(self, replica_type: ReplicaType, index: int) -> str | None:
        if self._job.spec.total_replicas <= 1:
            return None
        evaluator = replica_type is ReplicaType.EVALUATOR
        if evaluator not in self._clusters:
            cluster = cluster_spec(self._job, replica_type, self._settings)
            self._clusters[evaluator] = json.dumps(cluster, separators=(",", ":"))
        task = json.dumps({"type": replica_type.task_type, "index": index}, separators=(",", ":"))
        return f'{{"cluster":{self._clusters[evaluator]},"task":{task},"environment":"cloud"}}'
