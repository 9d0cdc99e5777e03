"""The DistTrainJob spec: what users write. Field names are the public contract."""

from __future__ import annotations

import json
from enum import StrEnum
from functools import cache
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from pydantic.alias_generators import to_camel

from disttrain_contract.evaluation import DEFAULT_FINAL_EVALUATION_SECONDS
from disttrain_contract.kept_logs import DEFAULT_LOG_BYTES
from disttrain_contract.progress import DEFAULT_PROGRESS_PORT
from disttrain_core.api.quantity import parse_quantity, resource_problems
from disttrain_core.api.rules import Rule, schema_rules
from disttrain_core.api.vendor_schema import SCHEMA_FILE


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class Strategy(StrEnum):
    MULTI_WORKER_MIRRORED = "MultiWorkerMirrored"
    PARAMETER_SERVER = "ParameterServer"
    MIRRORED = "Mirrored"


class ReplicaType(StrEnum):
    """Declared in the order used everywhere: TF_CONFIG, pod lists, status."""

    CHIEF = "Chief"
    WORKER = "Worker"
    PS = "PS"
    EVALUATOR = "Evaluator"

    @property
    def task_type(self) -> str:
        """The spelling TensorFlow, pod names and labels use."""
        return self.value.lower()

    @classmethod
    def from_task_type(cls, task_type: str) -> ReplicaType:
        """The replica type of a TF_CONFIG task type or `replica-type` label; ValueError if none."""
        for replica_type in cls:
            if replica_type.task_type == task_type:
                return replica_type
        raise ValueError(f"unknown task type {task_type!r}")


# The replica types whose pods make a gang job's gang, under every scheduler (`builders.gang`), and whose pods
# `schedulingPolicy.minAvailable` counts: an Evaluator takes no part in the collective or the parameter servers,
# and the job must not wait on it.
GANG_MEMBERS = (ReplicaType.CHIEF, ReplicaType.WORKER, ReplicaType.PS)


class RestartPolicy(StrEnum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    EXIT_CODE = "ExitCode"
    ALWAYS = "Always"


class CleanPodPolicy(StrEnum):
    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class RestartScope(StrEnum):
    JOB = "Job"
    REPLICA = "Replica"


class SuccessPolicy(StrEnum):
    DEFAULT = "Default"
    ALL_WORKERS = "AllWorkers"


class AccessMode(StrEnum):
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


TRAINER_CONTAINER = "tensorflow"
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"


def trainer_container(containers: list[dict[str, Any]]) -> dict[str, Any]:
    """The container named `tensorflow`, else the first one: where TF_CONFIG, the ports and the volumes go."""
    return next((c for c in containers if c.get("name") == TRAINER_CONTAINER), containers[0])


@cache
def pod_template_schema() -> dict[str, Any]:
    """The real PodTemplateSpec schema (vendored), tightened where a training pod needs more."""
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    pod_spec = schema["properties"]["spec"]
    schema["required"] = ["spec"]
    for field in ("containers", "initContainers"):
        container = pod_spec["properties"][field]["items"]
        container["properties"]["image"]["minLength"] = 1
    init_container = pod_spec["properties"]["initContainers"]["items"]
    init_container["required"] = sorted({*init_container.get("required", []), "image"})
    pod_spec.update(
        schema_rules(
            Rule("size(self.containers) > 0", "every replica template needs at least one container"),
            Rule(
                f"self.containers.all(c, has(c.image) || c.name == '{TRAINER_CONTAINER}')",
                f"every container needs an image, but the one named {TRAINER_CONTAINER}, which runs the install's "
                "trainer image without one",
            ),
        )
    )
    return schema


def _quantities_checked(template: dict[str, Any]) -> dict[str, Any]:
    """A template whose resource quantities the API server would refuse in a pod is refused here, by name."""
    spec = template.get("spec")
    problems = [
        problem
        for field in ("containers", "initContainers")
        for index, container in enumerate((spec or {}).get(field) or [] if isinstance(spec, dict) else [])
        if isinstance(container, dict)
        for problem in resource_problems(container.get("resources"), f"spec.{field}[{index}]")
    ]
    if problems:
        raise ValueError("; ".join(problems))
    return template


PodTemplateSpec = Annotated[dict[str, Any], AfterValidator(_quantities_checked), WithJsonSchema(pod_template_schema())]


@cache
def resource_requirements_schema() -> dict[str, Any]:
    """A container's `resources`, as the vendored PodTemplateSpec schema has it."""
    containers = pod_template_schema()["properties"]["spec"]["properties"]["containers"]
    schema: dict[str, Any] = json.loads(json.dumps(containers["items"]["properties"]["resources"]))
    return schema


ResourceRequirements = Annotated[dict[str, Any], WithJsonSchema(resource_requirements_schema())]

MAX_ATTEMPT = 2**31 - 1  # of one replica: its first pod is attempt 1
MAX_REPLICAS = 1000  # every pod's TF_CONFIG lists every task: 1000 workers make it about 60 KB
MAX_SECONDS = 2**31 - 1  # 68 years: as Kubernetes' own int32 durations, and far from datetime's range
MIN_PROGRESS_DEADLINE_SECONDS = 10  # the operator's progress poll interval: a shorter deadline could not be kept
MAX_PROGRESS_DEADLINE_SECONDS = 86400
DEFAULT_STARTUP_SECONDS = 300  # a first step after a restore may wait on a slow volume and on compiling
MAX_KEPT_LOG_SECONDS = 90 * 24 * 3600  # how long kept logs may outlive their job: a quarter, for a post-mortem


class ReplicaSpec(ApiModel):
    replicas: int = Field(1, ge=0, le=MAX_REPLICAS, description="Number of pods of this replica type.")
    restart_policy: RestartPolicy = Field(
        RestartPolicy.NEVER,
        description="When a failed pod is restarted: Never, OnFailure, ExitCode (retryable codes >= 128), Always.",
    )
    template: PodTemplateSpec = Field(
        description="Pod template. TF_CONFIG and the port go to the container named `tensorflow`, else the first."
    )
    shared_memory: str | None = Field(
        None,
        pattern=QUANTITY_PATTERN,
        description="With GPUs: the size of the memory-backed /dev/shm its pods get (NCCL keeps its buffers there; "
        "a container runtime's own is 64M). Default 1Gi, at most half the trainer's memory limit; a template that "
        "mounts its own /dev/shm keeps it. It counts against the trainer's memory limit, which it may not exceed.",
    )

    @model_validator(mode="after")
    def _shared_memory_fits(self) -> ReplicaSpec:
        """A memory-backed /dev/shm larger than the container's memory limit would be the kubelet's to evict."""
        if self.shared_memory is None:
            return self
        containers = (self.template.get("spec") or {}).get("containers") or []
        limit = ((trainer_container(containers).get("resources") or {}).get("limits") or {}).get("memory")
        if limit is not None and parse_quantity(self.shared_memory) > parse_quantity(limit):
            raise ValueError(
                f"sharedMemory {self.shared_memory} is more than the trainer container's memory limit {limit}: a "
                "memory-backed /dev/shm counts against it"
            )
        return self


class NcclDebug(StrEnum):
    VERSION = "VERSION"
    WARN = "WARN"
    INFO = "INFO"
    TRACE = "TRACE"


class NcclSettings(ApiModel):
    """NCCL's settings for every pod of the job that asks for GPUs, as environment variables of its trainer; a
    template's own NCCL_* variables stand, and any other passes through unchanged."""

    debug: NcclDebug | None = Field(None, description="NCCL_DEBUG: VERSION, WARN, INFO or TRACE.")
    socket_ifname: str | None = Field(
        None,
        max_length=256,
        pattern=r"^[=^]?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$",
        description="NCCL_SOCKET_IFNAME: the interfaces NCCL's sockets use, e.g. eth0, or ^lo,docker to leave out.",
    )
    ib_disable: bool | None = Field(None, description="NCCL_IB_DISABLE: no InfiniBand or RoCE, sockets only.")
    p2p_disable: bool | None = Field(None, description="NCCL_P2P_DISABLE: no direct GPU-to-GPU copies in one pod.")

    def env(self) -> dict[str, str]:
        """The variables, by name."""
        values = {
            "NCCL_DEBUG": self.debug.value if self.debug else None,
            "NCCL_SOCKET_IFNAME": self.socket_ifname,
            "NCCL_IB_DISABLE": None if self.ib_disable is None else str(int(self.ib_disable)),
            "NCCL_P2P_DISABLE": None if self.p2p_disable is None else str(int(self.p2p_disable)),
        }
        return {name: value for name, value in values.items() if value is not None}


# A Kubernetes label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters.
DNS_SUBDOMAIN_PATTERN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
LABEL_NAME_PATTERN = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"  # a label value, or a key's name part
LABEL_KEY_PATTERN = rf"^({DNS_SUBDOMAIN_PATTERN}/)?{LABEL_NAME_PATTERN}$"
LABEL_KEY_MAX_LENGTH = 253 + 1 + 63

# Who runs a job, as Kubernetes' Job and Kueue spell it: a DNS subdomain, '/', a path.
MANAGED_BY_PATTERN = rf"^{DNS_SUBDOMAIN_PATTERN}/[-._~A-Za-z0-9/]+$"
MANAGED_BY_MAX_LENGTH = 63
THIS_OPERATOR = "disttrain.io/operator"


def managed_by_field(description: str) -> Any:
    """The optional `managedBy` of a DistTrainJob's spec, or of a TFJob's runPolicy."""
    return Field(None, max_length=MANAGED_BY_MAX_LENGTH, pattern=MANAGED_BY_PATTERN, description=description)


class SchedulingPolicy(ApiModel):
    min_available: int | None = Field(
        None, ge=1, le=4 * MAX_REPLICAS, description="Pods that must be schedulable together (gang)."
    )
    queue: str | None = Field(None, min_length=1, description="Scheduler queue of the PodGroup.")
    priority_class: str | None = Field(None, min_length=1, description="PriorityClass of the PodGroup and pods.")
    schedule_timeout_seconds: int | None = Field(
        None,
        ge=1,
        le=MAX_SECONDS,
        description="How long the job's pods may find no place (PodScheduled False, Unschedulable) before the job "
        "fails with ScheduleTimeout; scheduler-plugins' PodGroup gets it too.",
    )
    topology_key: str | None = Field(
        None,
        max_length=LABEL_KEY_MAX_LENGTH,
        pattern=LABEL_KEY_PATTERN,
        description="A node label (topology.kubernetes.io/zone, a rack label): the gang's pods all go to nodes "
        "with one value of it, so that their collectives stay in one domain. Needs the operator's gang "
        "scheduler kubernetes (its PodGroup's schedulingConstraints.topology); others fail the job.",
    )


class FailureAction(StrEnum):
    FAIL_JOB = "FailJob"
    RESTART_JOB = "RestartJob"
    RESTART_REPLICA = "RestartReplica"
    IGNORE = "Ignore"


class ExitCodeOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"


MAX_FAILURE_RULES = 8
MAX_RULE_EXIT_CODES = 255  # as Job's podFailurePolicy: any exit code may be listed
CONDITION_TYPE_PATTERN = LABEL_KEY_PATTERN  # a pod condition's type is a qualified name, as a label key


class ExitCodeMatch(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                "self.operator != 'In' || !(0 in self.values)",
                "onExitCodes In may not name exit code 0: a container that exits 0 succeeded",
            )
        )
    )

    operator: ExitCodeOperator = Field(description="In: the exit code is one of values; NotIn: it is none of them.")
    values: list[Annotated[int, Field(ge=0, le=255)]] = Field(
        min_length=1, max_length=MAX_RULE_EXIT_CODES, description="Exit codes of the container named tensorflow."
    )


class PodConditionMatch(ApiModel):
    type: str = Field(
        max_length=LABEL_KEY_MAX_LENGTH,
        pattern=CONDITION_TYPE_PATTERN,
        description="A pod condition type that is True on the pod, as DisruptionTarget.",
    )


class FailureRule(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                "has(self.onExitCodes) || has(self.onPodConditions) || (has(self.onStall) && self.onStall)",
                "a failurePolicy rule needs onExitCodes or onPodConditions (or both), or onStall: true",
            ),
            Rule(
                "!has(self.onStall) || !self.onStall || (!has(self.onExitCodes) && !has(self.onPodConditions) && "
                "!has(self.replicaTypes) && self.action in ['FailJob', 'RestartJob'])",
                "a failurePolicy rule with onStall matches the whole job: no onExitCodes, onPodConditions or "
                "replicaTypes beside it, and its action is FailJob or RestartJob",
            ),
        )
    )

    action: FailureAction = Field(
        description="FailJob fails the job; RestartJob restarts every pod; RestartReplica the pod alone (a PS still "
        "takes the Chief and the workers with it); these two count against backoffLimit. Ignore restarts as the "
        "restartScope says without counting it, as a disruption."
    )
    replica_types: list[ReplicaType] | None = Field(
        None, min_length=1, max_length=len(ReplicaType), description="The replica types it applies to; unset: all."
    )
    on_exit_codes: ExitCodeMatch | None = Field(None, description="Matches a failed pod's exit code.")
    on_pod_conditions: list[PodConditionMatch] | None = Field(
        None, min_length=1, max_length=8, description="Matches a pod with any of these conditions True."
    )
    on_stall: bool | None = Field(
        None,
        description="Matches the job's stall (runPolicy.progressDeadlineSeconds passed without a step): FailJob fails "
        "it at once, RestartJob restarts it from its last checkpoint, counted (as without a rule).",
    )


_SAME_MATCH = (
    "has(a.replicaTypes) == has(b.replicaTypes) && (!has(a.replicaTypes) || a.replicaTypes == b.replicaTypes) && "
    "has(a.onExitCodes) == has(b.onExitCodes) && (!has(a.onExitCodes) || "
    "(a.onExitCodes.operator == b.onExitCodes.operator && a.onExitCodes.values == b.onExitCodes.values)) && "
    "has(a.onPodConditions) == has(b.onPodConditions) && (!has(a.onPodConditions) || "
    "a.onPodConditions.map(c, c.type) == b.onPodConditions.map(c, c.type))"
)


class FailurePolicy(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                f"self.rules.all(a, self.rules.all(b, a.action == b.action || !({_SAME_MATCH})))",
                "failurePolicy.rules contradict each other: two rules match the same pods with different actions",
            )
        )
    )

    rules: list[FailureRule] = Field(
        min_length=1,
        max_length=MAX_FAILURE_RULES,
        description="Checked in order for each pod that failed or was taken away; the first that matches acts. A pod "
        "no rule matches follows its replica's restartPolicy (a disruption restarts, uncounted).",
    )


class RunPolicy(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                "!has(self.gang) || self.gang || !has(self.schedulingPolicy) || "
                "(!has(self.schedulingPolicy.minAvailable) && !has(self.schedulingPolicy.topologyKey))",
                "runPolicy.gang false contradicts schedulingPolicy.minAvailable and topologyKey, which only gangs use",
            )
        )
    )

    backoff_limit: int = Field(
        6, ge=0, le=MAX_SECONDS, description="Restarts (of a pod or the whole job) before the job fails."
    )
    active_deadline_seconds: int | None = Field(
        None, ge=1, le=MAX_SECONDS, description="Fail the job this long after it started."
    )
    ttl_seconds_after_finished: int | None = Field(
        None, ge=0, le=MAX_SECONDS, description="Delete the job this long after it ended."
    )
    clean_pod_policy: CleanPodPolicy = Field(
        CleanPodPolicy.RUNNING, description="Pods deleted when the job ends: None, Running or All."
    )
    restart_scope: RestartScope | None = Field(
        None,
        description="Job restarts every pod when one fails, Replica only the failed one. "
        "Default: Job for MultiWorkerMirrored and Mirrored, Replica for ParameterServer.",
    )
    suspend: bool = Field(False, description="True deletes the pods (the checkpoint volume stays).")
    final_evaluation_seconds: int = Field(
        DEFAULT_FINAL_EVALUATION_SECONDS,
        ge=0,
        le=MAX_SECONDS,
        description="Once the chief (worker 0 without one) succeeds, how long an Evaluator may take to score the "
        "final checkpoint before the job succeeds and the Evaluator is stopped; 0 stops it at once.",
    )
    scheduling_policy: SchedulingPolicy | None = Field(None, description="Gang scheduling through a PodGroup.")
    gang: bool | None = Field(
        None,
        description="Whether the pods are placed together or not at all, also after each restart. Unset: a gang "
        "when the job has a schedulingPolicy or the operator makes every job one (DISTTRAIN_GANG_BY_DEFAULT); "
        "false opts out of both; true makes a gang with no schedulingPolicy.",
    )
    failure_policy: FailurePolicy | None = Field(
        None, description="What a failed pod does to the job, by exit code and pod condition, before restartPolicy."
    )
    progress_deadline_seconds: int | None = Field(
        None,
        ge=MIN_PROGRESS_DEADLINE_SECONDS,
        le=MAX_PROGRESS_DEADLINE_SECONDS,
        description="Once the job runs, a step must be reported at least this often, or the job is Stalled and "
        "restarts from its last checkpoint, counted against backoffLimit (it fails with reason Stalled once that "
        "is reached). Unset: the operator's default (DISTTRAIN_PROGRESS_DEADLINE_SECONDS), if any. At least the "
        "operator's progress poll interval (10 s), at most a day.",
    )
    startup_deadline_seconds: int | None = Field(
        None,
        ge=MIN_PROGRESS_DEADLINE_SECONDS,
        le=MAX_PROGRESS_DEADLINE_SECONDS,
        description="With a progress deadline: how long after each (re)start the first step may take (restoring a "
        f"checkpoint, compiling). Unset: progressDeadlineSeconds, and at least {DEFAULT_STARTUP_SECONDS} s.",
    )
    termination_grace_period_seconds: int | None = Field(
        None,
        ge=0,
        le=MAX_SECONDS,
        description="Every pod's terminationGracePeriodSeconds: how long a pod taken away (an eviction, a "
        "preemption, a drain, a suspend) has to save a checkpoint and exit before it is killed. Default: the "
        "template's own, else Kubernetes' 30 s.",
    )


# A ConfigMap holds at most 1 MiB in all; the kept log and its labels and annotations stay well below it.
MAX_LOG_BYTES = 768 * 1024
MIN_LOG_BYTES = 1024


class LogDestination(StrEnum):
    CONFIG_MAP = "ConfigMap"
    CHECKPOINT_VOLUME = "CheckpointVolume"


class Logs(ApiModel):
    keep: bool = Field(True, description="Keep each attempt's log where `destination` says, so it outlives the pod.")
    destination: LogDestination = Field(
        LogDestination.CONFIG_MAP,
        description="ConfigMap: the operator reads each attempt's log once its container ended into a ConfigMap "
        "owned by the job (it deletes the pod only after); no volume needed. CheckpointVolume: the trainer "
        "copies its output into logs/ on the checkpoint volume as it runs, kept as long as the volume; needs "
        "spec.checkpoint, and a program that honours DISTTRAIN_LOG_DIR (the disttrain trainer does).",
    )
    max_bytes_per_attempt: int = Field(
        DEFAULT_LOG_BYTES,
        ge=MIN_LOG_BYTES,
        le=MAX_LOG_BYTES,
        description="At most this many bytes of each attempt are kept: its end (on the checkpoint volume, at least "
        "the last half of this).",
    )
    ttl_seconds_after_job_deleted: int = Field(
        0,
        ge=0,
        le=MAX_KEPT_LOG_SECONDS,
        description="How long logs kept in ConfigMaps outlive the job, at most 90 days; 0: they are deleted with it.",
    )

    @property
    def in_config_maps(self) -> bool:
        return self.keep and self.destination is LogDestination.CONFIG_MAP

    @property
    def on_volume(self) -> bool:
        return self.keep and self.destination is LogDestination.CHECKPOINT_VOLUME


class TensorBoard(ApiModel):
    enabled: bool = Field(True, description="Run TensorBoard over the summaries the trainer writes to the volume.")
    image: str | None = Field(
        None,
        min_length=1,
        description="Its image; default: the image of the job's TensorFlow container (the Chief's, else worker "
        "0's), which ships TensorBoard where it ships TensorFlow.",
    )
    resources: ResourceRequirements | None = Field(
        None, description="Its container's resources (default: requests 100m CPU and 256Mi, limit 1Gi)."
    )


_ACCESS_MODES_DEFAULT = (AccessMode.READ_WRITE_MANY,)


class Checkpoint(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=schema_rules(
            Rule(
                "has(self.claimName) != has(self.size)",
                "checkpoint needs exactly one of claimName (an existing PVC) or size (a PVC the operator creates)",
            ),
            Rule(
                "has(self.size) || !(has(self.storageClassName) || has(self.accessModes))",
                "checkpoint storageClassName and accessModes only apply with size",
            ),
        )
    )

    mount_path: str = Field("/checkpoints", pattern=r"^/", description="Where the volume is mounted (absolute).")
    claim_name: str | None = Field(None, min_length=1, max_length=253, description="An existing PVC to mount.")
    size: str | None = Field(
        None,
        pattern=QUANTITY_PATTERN,
        description="Size of a PVC the operator creates and owns, e.g. 10Gi.",
    )
    storage_class_name: str | None = Field(None, min_length=1, description="StorageClass of the created PVC.")
    access_modes: list[AccessMode] | None = Field(
        None, min_length=1, description="Access modes of the created PVC (default ReadWriteMany)."
    )

    @property
    def effective_access_modes(self) -> tuple[AccessMode, ...]:
        return tuple(self.access_modes) if self.access_modes else _ACCESS_MODES_DEFAULT


_KNOWN_TYPES = "['Chief', 'Worker', 'PS', 'Evaluator']"


def _replicas(replica_type: ReplicaType) -> str:
    """CEL for the replica count of one type, 0 when the type is absent."""
    name = replica_type.value
    return f"('{name}' in self.replicaSpecs ? self.replicaSpecs['{name}'].replicas : 0)"


# Transition rules (they see `oldSelf`, so the API server checks them on updates only). What shapes
# the cluster cannot change under running pods; runPolicy and successPolicy can, and templates may
# change too, reaching the pods created after the change (restarts, resume after suspend).
IMMUTABLE_RULES = (
    Rule("self.strategy == oldSelf.strategy", "strategy cannot change after the job is created"),
    Rule("self.port == oldSelf.port", "port cannot change after the job is created"),
    Rule(  # the job's NetworkPolicy, made once, opens it to the operator
        "self.progressPort == oldSelf.progressPort", "progressPort cannot change after the job is created"
    ),
    Rule(
        "has(self.checkpoint) == has(oldSelf.checkpoint)"
        " && (!has(self.checkpoint) || self.checkpoint == oldSelf.checkpoint)",
        "checkpoint cannot change after the job is created",
    ),
    Rule(
        "has(self.tensorboard) == has(oldSelf.tensorboard)"
        " && (!has(self.tensorboard) || self.tensorboard == oldSelf.tensorboard)",
        "tensorboard cannot change after the job is created (its pods are told where to write their summaries)",
    ),
    Rule(
        "size(self.replicaSpecs) == size(oldSelf.replicaSpecs) && self.replicaSpecs.all(t, t in oldSelf.replicaSpecs"
        " && self.replicaSpecs[t].replicas == oldSelf.replicaSpecs[t].replicas)",
        "replica types and counts cannot change after the job is created",
    ),
    Rule(  # the manager that made the job's children is the one that ends them
        "has(self.managedBy) == has(oldSelf.managedBy)"
        " && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",
        "managedBy cannot change after the job is created",
    ),
)

_SPEC_RULES = schema_rules(
    *IMMUTABLE_RULES,
    Rule("self.progressPort != self.port", "progressPort must differ from port"),
    Rule(
        "!has(self.tensorboard) || (has(self.tensorboard.enabled) && !self.tensorboard.enabled)"
        " || has(self.checkpoint)",
        "tensorboard needs a checkpoint volume: the trainer writes its summaries there and TensorBoard reads them",
    ),
    Rule(
        "!has(self.logs) || !has(self.logs.destination) || self.logs.destination != 'CheckpointVolume'"
        " || (has(self.logs.keep) && !self.logs.keep) || has(self.checkpoint)",
        "logs.destination CheckpointVolume needs a checkpoint volume: the trainer writes its logs there",
    ),
    Rule(
        f"self.replicaSpecs.all(t, t in {_KNOWN_TYPES})",
        "replicaSpecs keys must be Chief, Worker, PS or Evaluator",
    ),
    Rule(f"{_replicas(ReplicaType.CHIEF)} <= 1", "at most one Chief replica"),
    Rule(f"{_replicas(ReplicaType.EVALUATOR)} <= 1", "at most one Evaluator replica"),
    Rule(
        f"{_replicas(ReplicaType.CHIEF)} + {_replicas(ReplicaType.WORKER)} > 0",
        "the job needs a Chief or at least one Worker",
    ),
    Rule(
        f"self.strategy != 'ParameterServer' || {_replicas(ReplicaType.PS)} >= 1",
        "ParameterServer needs at least one PS replica",
    ),
    Rule(
        f"self.strategy != 'ParameterServer' || {_replicas(ReplicaType.WORKER)} >= 1",
        "ParameterServer needs at least one Worker to run the training steps",
    ),
    Rule(  # the gang's members, under every scheduler
        "!has(self.runPolicy) || !has(self.runPolicy.schedulingPolicy)"
        " || !has(self.runPolicy.schedulingPolicy.minAvailable)"
        f" || self.runPolicy.schedulingPolicy.minAvailable <= {' + '.join(_replicas(kind) for kind in GANG_MEMBERS)}",
        "runPolicy.schedulingPolicy.minAvailable is more than the job's Chief, Worker and PS pods (an Evaluator is "
        "never part of a gang): such a gang could never be placed",
    ),
    Rule(
        f"self.strategy == 'ParameterServer' || {_replicas(ReplicaType.PS)} == 0",
        "PS replicas are only allowed with the ParameterServer strategy",
    ),
    Rule(
        f"self.strategy != 'Mirrored' || ({_replicas(ReplicaType.CHIEF)} + {_replicas(ReplicaType.WORKER)} == 1"
        f" && {_replicas(ReplicaType.EVALUATOR)} == 0)",
        "Mirrored runs in one pod: exactly one replica in total (one Chief or one Worker)",
    ),
)


class DistTrainJobSpec(ApiModel):
    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    strategy: Strategy = Field(Strategy.MULTI_WORKER_MIRRORED, description="TensorFlow distribution strategy.")
    replica_specs: dict[ReplicaType, ReplicaSpec] = Field(
        min_length=1,
        max_length=4,
        description="Replica types (Chief, Worker, PS, Evaluator) and their pods.",
    )
    run_policy: RunPolicy = Field(
        default_factory=RunPolicy,
        json_schema_extra={"default": {}},
        description="Restarts, deadlines, cleanup, suspend and gang scheduling.",
    )
    success_policy: SuccessPolicy = Field(
        SuccessPolicy.DEFAULT,
        description="Default: the Chief succeeds (worker 0 without a Chief). AllWorkers: every Worker too.",
    )
    checkpoint: Checkpoint | None = Field(None, description="A volume for checkpoints, shared by every pod.")
    tensorboard: TensorBoard | None = Field(
        None, description="A TensorBoard over the job's summaries, kept until the job is deleted."
    )
    logs: Logs = Field(
        default_factory=Logs,
        json_schema_extra={"default": {}},
        description="Each attempt's log, kept after its pod is gone.",
    )
    port: int = Field(2222, ge=1, le=65535, description="Port of the TensorFlow servers.")
    nccl: NcclSettings | None = Field(
        None, description="NCCL's settings for the pods that ask for GPUs (docs/gpus.md)."
    )
    progress_port: int = Field(
        DEFAULT_PROGRESS_PORT,
        ge=1,
        le=65535,
        description="Port where the chief (worker 0 without one) serves its progress for the operator to read.",
    )
    managed_by: str | None = managed_by_field(
        f"Who runs the job; unset or {THIS_OPERATOR} means the disttrain operator, which leaves a job managed "
        "by anyone else (kueue.x-k8s.io/multikueue, say) alone. Set once, at creation."
    )

    def replicas(self, replica_type: ReplicaType) -> int:
        spec = self.replica_specs.get(replica_type)
        return spec.replicas if spec else 0

    @property
    def total_replicas(self) -> int:
        return sum(self.replicas(replica_type) for replica_type in ReplicaType)

    @property
    def tensorboard_enabled(self) -> bool:
        return self.tensorboard is not None and self.tensorboard.enabled and self.checkpoint is not None

    @property
    def effective_restart_scope(self) -> RestartScope:
        if self.run_policy.restart_scope is not None:
            return self.run_policy.restart_scope
        if self.strategy is Strategy.PARAMETER_SERVER:
            return RestartScope.REPLICA
        return RestartScope.JOB
