"""What `Client.train` creates: a DistTrainJob whose every replica runs a shipped function, and the ConfigMap
that carries the function (owned by the job once it exists). Pure: the arguments are checked here, each
with a readable error, before anything reaches the cluster."""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement

from disttrain.shipped_function import ShippedFunction
from disttrain_contract.shipped_call import CALL_FILE, FUNCTION_FILE, RUN_FUNCTION_COMMAND
from disttrain_core.api.job import API_VERSION, KIND, DistTrainJob
from disttrain_core.api.spec import TRAINER_CONTAINER, ReplicaType, Strategy
from disttrain_core.kueue import QUEUE_LABEL
from disttrain_core.naming import JOB_NAME_LABEL

FUNCTION_MOUNT = "/etc/disttrain/function"
MAX_PARAMETERS_BYTES = 128 * 1024
MAX_PACKAGES = 64
INDEX_URL_ENV = "PIP_INDEX_URL"
# pip's settings where `train` is called that the replicas would not see: with packages to install, one of them set
# means the pods would resolve a private package's name on pip's default index instead.
UNSEEN_PIP_ENV = ("PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE")
NAME_LIMIT = 40  # the job's pods add `-worker-NNN`, their Services more


class TrainArgumentError(ValueError):
    """An argument of `Client.train` that no job could run with: the message names it and why."""


def _count(name: str, value: object, lowest: int, highest: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrainArgumentError(f"{name}= must be a whole number, not {value!r}")
    if value < lowest or (highest is not None and value > highest):
        bound = f"from {lowest} to {highest}" if highest is not None else f"at least {lowest}"
        raise TrainArgumentError(f"{name}= must be {bound}, not {value}")
    return value


def _strategy(strategy: str | None, ps: int) -> Strategy:
    if strategy is None:
        return Strategy.PARAMETER_SERVER if ps else Strategy.MULTI_WORKER_MIRRORED
    try:
        chosen = Strategy(strategy)
    except ValueError:
        known = ", ".join(member.value for member in Strategy)
        raise TrainArgumentError(f"strategy= {strategy!r} is not one of {known}") from None
    if (chosen is Strategy.PARAMETER_SERVER) != bool(ps):
        raise TrainArgumentError(f"strategy={chosen.value} and ps={ps}: parameter servers go with ParameterServer only")
    return chosen


def _parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping) or not all(isinstance(key, str) for key in parameters):
        raise TrainArgumentError("parameters= must be a dict with string keys")
    try:
        text = json.dumps(dict(parameters), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise TrainArgumentError(f"parameters= must be JSON: {error}") from None
    if len(text.encode()) > MAX_PARAMETERS_BYTES:
        raise TrainArgumentError(f"parameters= is over {MAX_PARAMETERS_BYTES} bytes as JSON: pass a path instead")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _packages(packages: list[str] | tuple[str, ...] | None) -> list[str]:
    listed = list(packages or [])
    if len(listed) > MAX_PACKAGES:
        raise TrainArgumentError(f"packages= lists {len(listed)}, over {MAX_PACKAGES}")
    for package in listed:
        if not isinstance(package, str):
            raise TrainArgumentError(f"packages= holds {package!r}, not a requirement string")
        try:
            Requirement(package)
        except InvalidRequirement as error:
            raise TrainArgumentError(f"packages= {package!r} is not a requirement pip reads: {error}") from None
    return listed


def _index(
    packages: list[str] | tuple[str, ...] | None, index_url: str | None, environ: Mapping[str, str]
) -> str | None:
    """The index the replicas install packages from: `index_url`, else PIP_INDEX_URL here. It is written in the
    function's ConfigMap, which anyone who may view the namespace reads, so one that carries credentials is
    refused; so is a pip setting here that the replicas would not see (UNSEEN_PIP_ENV), where packages are to be
    installed."""
    chosen = index_url or environ.get(INDEX_URL_ENV) or None
    if chosen is not None and (urlsplit(chosen).username or urlsplit(chosen).password):
        where = "index_url=" if index_url else INDEX_URL_ENV
        raise TrainArgumentError(
            f"{where} carries credentials, which the job's ConfigMap would show to anyone who may view the"
            " namespace: give the replicas an image whose pip.conf names the index, with its credentials in a Secret"
        )
    unseen = [name for name in UNSEEN_PIP_ENV if environ.get(name)]
    if packages and unseen and index_url is None:
        raise TrainArgumentError(
            f"{', '.join(unseen)} is set here and the replicas would not see it, so they would look for packages="
            " on one index only: pass index_url=, and put the other index in the image's pip.conf"
        )
    return chosen


def job_name(function: str) -> str:
    """`train-<function>-<5 random characters>` (no second `train-` for a function named train...), as
    DNS-1123 and within NAME_LIMIT."""
    stem = re.sub(r"[^a-z0-9]+", "-", function.lower()).strip("-") or "function"
    stem = stem if stem.startswith("train") else f"train-{stem}"
    return stem[: NAME_LIMIT - 6].rstrip("-") + "-" + secrets.token_hex(3)[:5]


def _resources(resources: Mapping[str, Any] | None) -> dict[str, Any]:
    """{cpu, memory, gpus} as a container's requests and limits (GPUs are limits, as Kubernetes wants)."""
    if not resources:
        return {}
    unknown = sorted(set(resources) - {"cpu", "memory", "gpus"})
    if unknown:
        raise TrainArgumentError(f"resources= knows cpu, memory and gpus, not {', '.join(unknown)}")
    requests = {key: str(resources[key]) for key in ("cpu", "memory") if resources.get(key) is not None}
    limits = dict(requests)
    if resources.get("gpus"):
        limits["nvidia.com/gpu"] = str(_count("resources['gpus']", resources["gpus"], 0))
    return {"requests": requests, "limits": limits}


def _replicas(
    strategy: str | None, *, workers: object, ps: object, chief: object | None, evaluator: object
) -> tuple[Strategy, dict[ReplicaType, int]]:
    """The strategy and the count of each replica type, checked: a ParameterServer job has its chief by default."""
    counts = {
        ReplicaType.WORKER: _count("workers", workers, 1, 1000),
        ReplicaType.PS: _count("ps", ps, 0, 1000),
        ReplicaType.EVALUATOR: _count("evaluator", evaluator, 0, 1),
    }
    chosen = _strategy(strategy, counts[ReplicaType.PS])
    default_chief = 1 if chosen is Strategy.PARAMETER_SERVER else 0
    counts[ReplicaType.CHIEF] = _count("chief", default_chief if chief is None else chief, 0, 1)
    if chosen is Strategy.PARAMETER_SERVER and not counts[ReplicaType.CHIEF]:
        raise TrainArgumentError("ParameterServer needs chief=1: the chief runs the function, the others serve it")
    return chosen, counts


def _template(
    config_map: str, image: str | None, env: Mapping[str, str] | None, resources: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Every replica's pod template: the function's runner over the ConfigMap, as `restricted` admits it."""
    container: dict[str, Any] = {
        "name": TRAINER_CONTAINER,  # with no image, it runs the install's trainer image (DISTTRAIN_TRAINER_IMAGE)
        **({"image": image} if image else {}),
        "command": [RUN_FUNCTION_COMMAND, FUNCTION_MOUNT],
        "env": [{"name": key, "value": str(value)} for key, value in (env or {}).items()],
        "volumeMounts": [{"name": "function", "mountPath": FUNCTION_MOUNT, "readOnly": True}],
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if resources:
        container["resources"] = _resources(resources)
    return {
        "spec": {
            "automountServiceAccountToken": False,  # the function needs no API access
            # what a namespace enforcing the `restricted` Pod Security Standard admits
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container],
            "volumes": [{"name": "function", "configMap": {"name": config_map}}],
        }
    }


def train_objects(
    function: ShippedFunction,
    *,
    namespace: str,
    workers: object = 2,
    ps: object = 0,
    chief: object | None = None,
    evaluator: object = 0,
    strategy: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    image: str | None = None,
    packages: list[str] | tuple[str, ...] | None = None,
    index_url: str | None = None,
    resources: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
    queue: str | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    tensorboard: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> tuple[DistTrainJob, dict[str, Any]]:
    """The job and its function's ConfigMap, or TrainArgumentError (FunctionNotShippableError for
    parameters the function cannot take). Packages come from `index_url`, else from the index pip here
    is set to (`PIP_INDEX_URL` in `environ`), else from pip's own default in the replicas (`_index`)."""
    chosen, counts = _replicas(strategy, workers=workers, ps=ps, chief=chief, evaluator=evaluator)
    call = _call(function, parameters, packages, _index(packages, index_url, environ))
    name = name or job_name(function.name)
    config_map = f"{name}-function"
    template = _template(config_map, image, env, resources)
    manifest: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue} if queue else {}},
        "spec": {
            "strategy": chosen.value,
            "replicaSpecs": {
                replica.value: {"replicas": count, "restartPolicy": "ExitCode", "template": template}
                for replica, count in counts.items()
                if count
            },
            **({"checkpoint": dict(checkpoint)} if checkpoint is not None else {}),
            **({"tensorboard": {"enabled": True}} if tensorboard else {}),
        },
    }
    job = DistTrainJob.model_validate(manifest)
    shipped = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map, "namespace": namespace, "labels": {JOB_NAME_LABEL: name}},
        "data": {FUNCTION_FILE: function.source, CALL_FILE: json.dumps(call)},
    }
    return job, shipped


def _call(
    function: ShippedFunction,
    parameters: Mapping[str, Any] | None,
    packages: list[str] | tuple[str, ...] | None,
    index_url: str | None,
) -> dict[str, Any]:
    """What the function runner reads of the call: the function, its arguments, what it takes, and its packages."""
    arguments = function.arguments(_parameters(parameters))
    return {
        "name": function.name,
        "arguments": arguments,
        "takesStrategy": function.takes_strategy,
        "takesProgress": function.takes_progress,
        "packages": _packages(packages),
        "indexUrl": index_url,
    }
