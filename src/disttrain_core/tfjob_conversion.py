"""Kubeflow TFJob (`kubeflow.org/v1`) manifests as DistTrainJobs, with what changes said in notes.

A TFJob field either maps to a DistTrainJob field or is refused by name: nothing is dropped in
silence. TFJob's defaults for replicas, restartPolicy and the port (training-operator v1.8's
`SetDefaults_TFJob`) are written out; cleanPodPolicy and backoffLimit take disttrain's defaults,
which fix what TFJob users asked for (PS pods left running, restarts without end). Every such change
of meaning is a note. Pure: the input is a parsed manifest, the output a manifest and its notes.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disttrain_contract.exit_codes import RETRYABLE_FROM
from disttrain_core.api import tfjob
from disttrain_core.api.job import API_VERSION, KIND
from disttrain_core.api.spec import (
    GANG_MEMBERS,
    TRAINER_CONTAINER,
    CleanPodPolicy,
    ExitCodeOperator,
    FailureAction,
    ReplicaType,
    RestartPolicy,
    Strategy,
    SuccessPolicy,
    trainer_container,
)
from disttrain_core.types import Manifest

TFJOB_API_VERSION = tfjob.API_VERSION
TFJOB_KIND = tfjob.KIND
TFJOB_PORT_NAME = "tfjob-port"
TFJOB_DEFAULT_PORT = 2222
TRAINING_OPERATOR = tfjob.TRAINING_OPERATOR

# Replica type names as TFJob accepts them, in any case; Master is its older name for Chief.
_REPLICA_TYPES = {
    "chief": ReplicaType.CHIEF,
    "master": ReplicaType.CHIEF,
    "worker": ReplicaType.WORKER,
    "ps": ReplicaType.PS,
    "evaluator": ReplicaType.EVALUATOR,
}
_METADATA_KEPT = ("name", "generateName", "namespace", "labels", "annotations")
# What the API server sets on a TFJob read back from a cluster: it belongs to that object, not to the job.
_METADATA_SERVER_SET = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "finalizers",
)
_SCHEDULING_FIELDS = {
    "minAvailable": "minAvailable",
    "queue": "queue",
    "priorityClass": "priorityClass",
    "scheduleTimeoutSeconds": "scheduleTimeoutSeconds",
}
_RUN_POLICY_COPIED = ("activeDeadlineSeconds", "ttlSecondsAfterFinished", "suspend")


class UnconvertibleError(ValueError):
    """A TFJob field with no DistTrainJob equivalent, or a value that cannot be read; names the field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field


@dataclass(frozen=True)
class Conversion:
    job: Manifest
    notes: tuple[str, ...]


def is_tfjob(document: object) -> bool:
    return isinstance(document, Mapping) and document.get("kind") == TFJOB_KIND


def convert(tfjob: Mapping[str, Any]) -> Conversion:
    """A DistTrainJob manifest for one TFJob, and notes on every change of meaning."""
    if tfjob.get("apiVersion") != TFJOB_API_VERSION:
        raise UnconvertibleError("apiVersion", f"{tfjob.get('apiVersion')!r} is not {TFJOB_API_VERSION}")
    _refuse_unknown(tfjob, "", ("apiVersion", "kind", "metadata", "spec", "status"))
    notes: list[str] = []
    spec = _mapping(tfjob.get("spec"), "spec")
    _refuse_unknown(spec, "spec", ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker"))
    if spec.get("enableDynamicWorker"):
        raise UnconvertibleError(
            "spec.enableDynamicWorker",
            "no equivalent: every task gets the whole cluster in TF_CONFIG; under ParameterServer a failed "
            "worker restarts alone (restartPolicy OnFailure or ExitCode), which keeps the job going",
        )
    replica_specs = _replica_specs(_mapping(spec.get("tfReplicaSpecs"), "spec.tfReplicaSpecs"))
    strategy = _strategy(replica_specs)
    converted_spec: Manifest = {"strategy": strategy.value}
    notes.append(_strategy_note(strategy))
    port = _port(replica_specs)
    by_exit_code = [
        replica_type
        for replica_type, (_, policy, _) in replica_specs.items()
        if policy is RestartPolicy.EXIT_CODE and replica_type is not ReplicaType.EVALUATOR
    ]
    converted_spec["replicaSpecs"] = _converted_replicas(replica_specs, by_exit_code)
    tf_run_policy = _mapping(spec.get("runPolicy") or {}, "spec.runPolicy")
    run_policy = _run_policy(tf_run_policy, notes)
    managed_by = _managed_by(tf_run_policy, notes)
    if by_exit_code:
        run_policy["failurePolicy"] = {"rules": [_exit_code_rule(by_exit_code)]}
        notes.append(
            f"restartPolicy ExitCode ({', '.join(kind.value for kind in by_exit_code)}) is OnFailure with a "
            "failurePolicy rule that fails the job on exit codes 1-127, as training-operator's ExitCode does; "
            "a pod taken away (an eviction, a preemption) restarts, uncounted, whatever its exit code"
        )
    _gang_of_training_pods(run_policy, converted_spec["replicaSpecs"], notes)
    if run_policy:
        converted_spec["runPolicy"] = run_policy
    success_policy = spec.get("successPolicy") or ""
    if success_policy not in ("", SuccessPolicy.ALL_WORKERS.value):
        raise UnconvertibleError("spec.successPolicy", f"{success_policy!r} is not '' or 'AllWorkers'")
    if success_policy:
        converted_spec["successPolicy"] = success_policy
    if port != TFJOB_DEFAULT_PORT:
        converted_spec["port"] = port
    if managed_by:
        converted_spec["managedBy"] = managed_by
    notes += _behaviour_notes(strategy, replica_specs, run_policy)
    job: Manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": _metadata(_mapping(tfjob.get("metadata") or {}, "metadata"), tfjob, notes),
        "spec": converted_spec,
    }
    return Conversion(job, tuple(notes))


def _converted_replicas(
    replica_specs: Mapping[ReplicaType, _ReplicaEntry], by_exit_code: Collection[ReplicaType]
) -> Manifest:
    """The replica specs in DistTrainJob's terms; ExitCode becomes OnFailure (a failure-policy rule keeps its
    meaning)."""
    return {
        replica_type.value: {
            "replicas": replicas,
            "restartPolicy": (RestartPolicy.ON_FAILURE if replica_type in by_exit_code else policy).value,
            "template": template,
        }
        for replica_type, (replicas, policy, template) in replica_specs.items()
    }


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise UnconvertibleError(field, f"expected an object, got {type(value).__name__}")
    return value


def _refuse_unknown(section: Mapping[str, Any], where: str, known: tuple[str, ...]) -> None:
    for key in section:
        if key not in known:
            field = f"{where}.{key}" if where else str(key)
            raise UnconvertibleError(field, "not a TFJob field, or one with no DistTrainJob equivalent")


def _metadata(metadata: Mapping[str, Any], tfjob: Mapping[str, Any], notes: list[str]) -> Manifest:
    for key in metadata:
        if key not in _METADATA_KEPT and key not in _METADATA_SERVER_SET:
            raise UnconvertibleError(f"metadata.{key}", "not an object metadata field")
    left = [key for key in _METADATA_SERVER_SET if key in metadata] + (["status"] if "status" in tfjob else [])
    if left:
        notes.append(f"left out what the API server set on the TFJob: {', '.join(left)}")
    return {key: copy.deepcopy(metadata[key]) for key in _METADATA_KEPT if key in metadata}


_ReplicaEntry = tuple[int, RestartPolicy, Manifest]


def replica_type_of(name: str) -> ReplicaType:
    """The replica type a `tfReplicaSpecs` key names, in any case (Master is Chief)."""
    replica_type = _REPLICA_TYPES.get(name.lower())
    if replica_type is None:
        raise UnconvertibleError(
            f"spec.tfReplicaSpecs.{name}", "not a TFJob replica type (Chief, Master, Worker, PS, Evaluator)"
        )
    return replica_type


def _exit_code_rule(replica_types: Sequence[ReplicaType]) -> Manifest:
    """TFJob's restartPolicy ExitCode as a rule: 1-127 are permanent (the job fails), the rest retryable."""
    permanent = {"operator": ExitCodeOperator.IN.value, "values": list(range(1, RETRYABLE_FROM))}
    return {
        "action": FailureAction.FAIL_JOB.value,
        "replicaTypes": [kind.value for kind in replica_types],
        "onExitCodes": permanent,
    }


def _replica_specs(specs: Mapping[str, Any]) -> dict[ReplicaType, _ReplicaEntry]:
    """Per replica type, in DistTrainJob's order: replicas and restartPolicy with TFJob's defaults, the template."""
    if not specs:
        raise UnconvertibleError("spec.tfReplicaSpecs", "no replica types")
    found: dict[ReplicaType, _ReplicaEntry] = {}
    names: dict[ReplicaType, str] = {}
    for name, value in specs.items():
        field = f"spec.tfReplicaSpecs.{name}"
        replica_type = replica_type_of(str(name))
        if replica_type in names:
            raise UnconvertibleError(field, f"names the same replica type as {names[replica_type]}")
        names[replica_type] = str(name)
        spec = _mapping(value, field)
        _refuse_unknown(spec, field, ("replicas", "restartPolicy", "template"))
        replicas = spec.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool):
            raise UnconvertibleError(f"{field}.replicas", f"{replicas!r} is not an integer")
        try:
            policy = RestartPolicy(spec.get("restartPolicy") or RestartPolicy.NEVER.value)
        except ValueError:
            allowed = ", ".join(p.value for p in RestartPolicy)
            raise UnconvertibleError(
                f"{field}.restartPolicy", f"{spec.get('restartPolicy')!r} is not {allowed}"
            ) from None
        template = copy.deepcopy(dict(_mapping(spec.get("template"), f"{field}.template")))
        found[replica_type] = (replicas, policy, template)
    return {replica_type: found[replica_type] for replica_type in ReplicaType if replica_type in found}


def _strategy(specs: Mapping[ReplicaType, _ReplicaEntry]) -> Strategy:
    def replicas(replica_type: ReplicaType) -> int:
        entry = specs.get(replica_type)
        return entry[0] if entry else 0

    if replicas(ReplicaType.PS) > 0:
        return Strategy.PARAMETER_SERVER
    if replicas(ReplicaType.CHIEF) + replicas(ReplicaType.WORKER) == 1 and not replicas(ReplicaType.EVALUATOR):
        return Strategy.MIRRORED
    return Strategy.MULTI_WORKER_MIRRORED


def _strategy_note(strategy: Strategy) -> str:
    reason = {
        Strategy.PARAMETER_SERVER: "the job has PS replicas",
        Strategy.MIRRORED: "the job runs in one pod",
        Strategy.MULTI_WORKER_MIRRORED: "the job has several training replicas and no PS",
    }[strategy]
    return (
        f"strategy {strategy.value}: {reason} (a TFJob names none; the strategy sets defaults and checks, "
        "the code in the image is unchanged)"
    )


def _port(specs: Mapping[ReplicaType, _ReplicaEntry]) -> int:
    """Each replica type's `tfjob-port` (TFJob's default 2222 where its container declares none): a
    DistTrainJob has one port for the whole job."""
    ports: dict[int, str] = {}
    for replica_type, (_, _, template) in specs.items():
        containers = [c for c in (template.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
        declared = (trainer_container(containers).get("ports") or []) if containers else []
        named = [e for e in declared if isinstance(e, Mapping) and e.get("name") == TFJOB_PORT_NAME]
        port = named[0].get("containerPort", TFJOB_DEFAULT_PORT) if named else TFJOB_DEFAULT_PORT
        ports.setdefault(port, replica_type.value)
    if len(ports) > 1:
        described = ", ".join(f"{port} ({replica_type})" for port, replica_type in ports.items())
        raise UnconvertibleError(
            f"spec.tfReplicaSpecs.*.template.spec.containers[{TRAINER_CONTAINER}].ports[{TFJOB_PORT_NAME}]",
            f"differs between replica types: {described}; a DistTrainJob has one port for every task",
        )
    return next(iter(ports), TFJOB_DEFAULT_PORT)


def _managed_by(policy: Mapping[str, Any], notes: list[str]) -> str | None:
    """runPolicy.managedBy, as the DistTrainJob's spec.managedBy: training-operator's own value means the
    operator that runs the job, which for a DistTrainJob is disttrain's, so it goes."""
    managed_by = policy.get("managedBy")
    if managed_by is not None and not isinstance(managed_by, str):
        raise UnconvertibleError("spec.runPolicy.managedBy", f"{managed_by!r} is not a string")
    if managed_by == TRAINING_OPERATOR:
        notes.append(f"runPolicy.managedBy {managed_by!r} left out: the disttrain operator runs the job")
        return None
    if managed_by:
        notes.append(f"runPolicy.managedBy {managed_by!r} is spec.managedBy: the disttrain operator leaves it alone")
    return managed_by or None


def _run_policy(policy: Mapping[str, Any], notes: list[str]) -> Manifest:
    known = ("cleanPodPolicy", "backoffLimit", "schedulingPolicy", "managedBy", *_RUN_POLICY_COPIED)
    _refuse_unknown(policy, "spec.runPolicy", known)
    converted: Manifest = {key: policy[key] for key in _RUN_POLICY_COPIED if policy.get(key) is not None}
    clean = policy.get("cleanPodPolicy")
    if clean is not None:
        try:
            converted["cleanPodPolicy"] = CleanPodPolicy(clean).value
        except ValueError:
            allowed = ", ".join(p.value for p in CleanPodPolicy)
            raise UnconvertibleError("spec.runPolicy.cleanPodPolicy", f"{clean!r} is not {allowed}") from None
    if policy.get("backoffLimit") is not None:
        converted["backoffLimit"] = policy["backoffLimit"]
    scheduling = policy.get("schedulingPolicy")
    if scheduling is not None:
        scheduling = _mapping(scheduling, "spec.runPolicy.schedulingPolicy")
        if "minResources" in scheduling:
            raise UnconvertibleError(
                "spec.runPolicy.schedulingPolicy.minResources",
                "no equivalent: the PodGroup's minimum resources are the sum of its pods' requests",
            )
        _refuse_unknown(scheduling, "spec.runPolicy.schedulingPolicy", tuple(_SCHEDULING_FIELDS))
        converted["schedulingPolicy"] = {
            target: scheduling[source] for source, target in _SCHEDULING_FIELDS.items() if source in scheduling
        }
    return converted


def _gang_of_training_pods(run_policy: Manifest, replica_specs: Mapping[str, Any], notes: list[str]) -> None:
    """training-operator's minAvailable counts the Evaluator; a DistTrainJob's gang never holds it
    (`api.spec.GANG_MEMBERS`): one that counts it asks for every training pod. One above every pod of the job
    stays, so the job is held until it is lowered, as training-operator holds it."""
    asked = (run_policy.get("schedulingPolicy") or {}).get("minAvailable")
    counts = {kind: int(spec.get("replicas", 1)) for kind, spec in replica_specs.items()}
    members = sum(counts.get(kind.value, 0) for kind in GANG_MEMBERS)
    if isinstance(asked, int) and not isinstance(asked, bool) and members < asked <= sum(counts.values()):
        run_policy["schedulingPolicy"]["minAvailable"] = members
        notes.append(
            f"schedulingPolicy.minAvailable {asked} counts pods beside the Chief, Worker and PS ones, as "
            f"training-operator counted its Evaluator; a gang never holds an Evaluator: minAvailable {members}"
        )


def _behaviour_notes(
    strategy: Strategy, specs: Mapping[ReplicaType, _ReplicaEntry], run_policy: Mapping[str, Any]
) -> list[str]:
    """Where the same fields behave differently under disttrain than under training-operator."""
    notes: list[str] = []
    restarting = any(policy is not RestartPolicy.NEVER for _, policy, _ in specs.values())
    if restarting and strategy is not Strategy.PARAMETER_SERVER:
        notes.append(
            f"a failed pod restarts the whole job (restartScope Job, the default for {strategy.value}): "
            "a lone restarted worker cannot rejoin its peers; TFJob restarted only the failed pod "
            "(runPolicy.restartScope: Replica keeps that)"
        )
    if "backoffLimit" in run_policy:
        notes.append("backoffLimit counts every restart, of a pod or of the whole job, under every restartPolicy")
    else:
        notes.append("backoffLimit 6 (disttrain's default): the TFJob had none, so it restarted without end")
    if "cleanPodPolicy" not in run_policy:
        notes.append(
            "cleanPodPolicy Running (disttrain's default) stops the pods still running when the job ends, "
            "PS and Evaluator included; the TFJob's default, None, left them running"
        )
    elif run_policy["cleanPodPolicy"] == CleanPodPolicy.NONE.value and ReplicaType.PS in specs:
        notes.append(
            "cleanPodPolicy None leaves the PS pods running after the job ends, as under TFJob; Running stops them"
        )
    if ReplicaType.EVALUATOR in specs:
        notes.append(
            "an Evaluator's failure no longer fails the job (it restarts alone) and it never counts for success; "
            "only its own TF_CONFIG lists it"
        )
    notes.append(
        "pods are labelled disttrain.io/job-name, replica-type and replica-index (not training.kubeflow.org/...) "
        "and reached through one headless Service per job: {pod}.{job}.{namespace}.svc in TF_CONFIG"
    )
    return notes
