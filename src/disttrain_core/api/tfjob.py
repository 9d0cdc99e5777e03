"""Kubeflow's TFJob (`kubeflow.org/v1`) as the operator serves it when asked to (`--serve-tfjobs`): the
fields of training-operator v1.9's TFJob, so existing manifests, scripts and SDK code work unchanged,
and a status in TFJob's shape with disttrain's own fields beside it (readers of TFJob's fields ignore
the others). The CRD is generated from these models, like the DistTrainJob CRD.

Fields that have no disttrain equivalent are in the schema, so they are never dropped in silence,
and refused by a CEL rule that says why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from pydantic import ConfigDict, Field

from disttrain_core.api.rules import Rule, schema_rules
from disttrain_core.api.spec import (
    MAX_REPLICAS,
    MAX_SECONDS,
    THIS_OPERATOR,
    ApiModel,
    CleanPodPolicy,
    PodTemplateSpec,
    RestartPolicy,
    managed_by_field,
)
from disttrain_core.api.status import (
    HISTORY_DESCRIPTION,
    MAX_HISTORY,
    MAX_UNKEPT_LOGS,
    ConditionStatus,
    ConditionType,
    Disruption,
    Evaluation,
    JobPhase,
    Progress,
    ProgressPoint,
    RestartBackoff,
    SavedCheckpoint,
    UnkeptLogs,
)

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION: Final = "kubeflow.org/v1"
KIND: Final = "TFJob"
PLURAL = "tfjobs"
SINGULAR = "tfjob"
# Kueue's job integrations and training-operator use this value for jobs they leave to the operator.
TRAINING_OPERATOR = "kubeflow.org/training-operator"


class TFReplicaSpec(ApiModel):
    replicas: int = Field(1, ge=0, le=MAX_REPLICAS, description="Number of pods of this replica type.")
    restart_policy: RestartPolicy = Field(RestartPolicy.NEVER, description="Never, OnFailure, ExitCode or Always.")
    template: PodTemplateSpec = Field(description="Pod template; TF_CONFIG goes to the container named `tensorflow`.")


class TFSchedulingPolicy(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                "!has(self.minResources)",
                "minResources has no disttrain equivalent: the PodGroup's minimum is the sum of its pods' requests",
            )
        )
    )

    min_available: int | None = Field(None, ge=1, le=4 * MAX_REPLICAS)
    queue: str | None = Field(None, min_length=1)
    min_resources: dict[str, str] | None = None
    priority_class: str | None = Field(None, min_length=1)
    schedule_timeout_seconds: int | None = Field(None, ge=1, le=MAX_SECONDS)


class TFRunPolicy(ApiModel):
    clean_pod_policy: CleanPodPolicy | None = Field(
        None, description="Pods deleted when the job ends; unset means Running (disttrain's default)."
    )
    ttl_seconds_after_finished: int | None = Field(None, ge=0, le=MAX_SECONDS)
    active_deadline_seconds: int | None = Field(None, ge=1, le=MAX_SECONDS)
    backoff_limit: int | None = Field(None, ge=0, le=MAX_SECONDS, description="Restarts before failing; default 6.")
    scheduling_policy: TFSchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = managed_by_field(
        f"Who runs the job; unset, {TRAINING_OPERATOR} or {THIS_OPERATOR} mean the disttrain operator, which "
        "leaves a TFJob managed by anyone else (kueue.x-k8s.io/multikueue, say) alone. Set once, at creation."
    )


_REPLICA_KEYS = "['chief', 'master', 'worker', 'ps', 'evaluator']"
_MANAGER = "(has({side}.runPolicy) && has({side}.runPolicy.managedBy) ? {side}.runPolicy.managedBy : '')"

_SPEC_RULES = schema_rules(
    Rule(
        f"self.tfReplicaSpecs.all(t, t.lowerAscii() in {_REPLICA_KEYS})",
        "tfReplicaSpecs keys must be Chief (or Master), Worker, PS or Evaluator",
    ),
    Rule(
        "!has(self.enableDynamicWorker) || !self.enableDynamicWorker",
        "enableDynamicWorker has no disttrain equivalent: under ParameterServer a failed worker restarts alone",
    ),
    Rule(  # runPolicy may come or go on an update: the rule sits on the spec, which is always there
        f"{_MANAGER.format(side='self')} == {_MANAGER.format(side='oldSelf')}",
        "runPolicy.managedBy cannot change after the job is created",
    ),
    Rule(  # a DistTrainJob's rule too: its pods' TF_CONFIG names every task
        "size(self.tfReplicaSpecs) == size(oldSelf.tfReplicaSpecs) && self.tfReplicaSpecs.all(t, t in"
        " oldSelf.tfReplicaSpecs && self.tfReplicaSpecs[t].replicas == oldSelf.tfReplicaSpecs[t].replicas)",
        "replica types and counts cannot change after the job is created",
    ),
)


class TFJobSpec(ApiModel):
    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    tf_replica_specs: dict[str, TFReplicaSpec] = Field(
        min_length=1, max_length=4, description="Chief (or Master), Worker, PS and Evaluator, in any case."
    )
    run_policy: TFRunPolicy | None = None
    success_policy: str | None = Field(None, pattern="^(|AllWorkers)$", description="'' or AllWorkers.")
    enable_dynamic_worker: bool | None = None


class TFJobCondition(ApiModel):
    """TFJob's condition: metav1.Condition's fields and `lastUpdateTime`."""

    type: ConditionType
    status: ConditionStatus
    reason: str = ""
    message: str = ""
    last_update_time: datetime | None = None
    last_transition_time: datetime | None = None
    observed_generation: int | None = Field(None, ge=0)


class TFReplicaStatus(ApiModel):
    active: int = Field(0, ge=0)
    succeeded: int = Field(0, ge=0)
    failed: int = Field(0, ge=0)
    ready: int = Field(0, ge=0, description="Pods running and ready (disttrain).")
    restarts: int = Field(0, ge=0, description="Restarts counted against backoffLimit (disttrain).")
    succeeded_indexes: list[int] = Field(default_factory=list, description="Never created again (disttrain).")
    attempts: list[int] = Field(default_factory=list, description="By index, its latest pod's attempt (disttrain).")
    selector: str | None = None


class TFJobStatus(ApiModel):
    conditions: list[TFJobCondition] = Field(
        default_factory=list,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replica_statuses: dict[str, TFReplicaStatus] = Field(default_factory=dict)
    start_time: datetime | None = None
    completion_time: datetime | None = None
    last_reconcile_time: datetime | None = None
    phase: JobPhase | None = Field(None, description="disttrain's phase of the job.")
    ready: str | None = None
    restart_count: int = Field(0, ge=0)
    disruptions: int = Field(
        0,
        ge=0,
        description="Restarts after pods were taken away on purpose, not counted against backoffLimit (disttrain).",
    )
    last_disruption: Disruption | None = None
    restart_backoff: RestartBackoff | None = Field(
        None, description="Quick restarts wait longer and longer to start (disttrain)."
    )
    observed_generation: int | None = Field(None, ge=0)
    progress: Progress | None = None
    progress_answer_time: datetime | None = Field(
        None, description="When this run's trainer first answered on its progress port (disttrain)."
    )
    progress_history: list[ProgressPoint] = Field(
        default_factory=list, max_length=MAX_HISTORY, description=HISTORY_DESCRIPTION
    )
    checkpoint: SavedCheckpoint | None = Field(
        None, description="The last checkpoint the trainer reported saving: where a restart resumes (disttrain)."
    )
    evaluation: Evaluation | None = Field(None, description="The Evaluator's last scores (disttrain).")
    unkept_logs: list[UnkeptLogs] = Field(
        default_factory=list, max_length=MAX_UNKEPT_LOGS, description="Attempts whose log was not kept (disttrain)."
    )
