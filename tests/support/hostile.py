"""Hostile manifests, built in code because some are megabytes or thousands of levels deep.

`REFUSED`: each must be refused, with a clear message, by both `render`'s validation and the API
server (where the two layers word it differently, both texts are given). `ACCEPTED_BY_THE_API_SERVER`:
jobs the CRD cannot judge, which the operator must run or fail cleanly while serving every other job.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

MEGABYTE = 1 << 20
Path = tuple[str | int, ...]  # keys and list indexes from a manifest's root


def job(name: str = "hostile", **worker: Any) -> dict[str, Any]:
    """A valid two-worker job whose Worker spec takes the given overrides."""
    container = {
        "name": "tensorflow",
        "image": "disttrain/trainer:0.1.0",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    spec = {"replicas": 2, "template": {"spec": {"containers": [container]}}, **worker}
    return {
        "apiVersion": "disttrain.io/v1alpha1",
        "kind": "DistTrainJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": {"Worker": spec}},
    }


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A copy of `base` (the valid job) with the value at a dotted path (list indexes as numbers) replaced."""
    manifest = copy.deepcopy(base or job())
    *parents, last = path.split(".")
    node: Any = manifest
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    node[int(last) if isinstance(node, list) else last] = value
    return manifest


_CONTAINER = "spec.replicaSpecs.Worker.template.spec.containers.0"


@dataclass(frozen=True)
class Hostile:
    name: str
    text: str  # JSON, as a client would send it
    expected: str  # a text every refusal contains
    expected_by_api_server: str | None = None  # where the API server words it otherwise

    @property
    def api_server_message(self) -> str:
        return self.expected_by_api_server or self.expected


def _refused(name: str, manifest: dict[str, Any], expected: str, by_api_server: str | None = None) -> Hostile:
    return Hostile(name, json.dumps(manifest), expected, by_api_server)


def _deeply_nested(depth: int) -> str:
    """A job whose affinity holds `depth` nested objects: JSON text, as no Python encoder would write it."""
    nested = '{"a":' * depth + "{}" + "}" * depth
    return json.dumps(job()).replace('"containers":', f'"affinity": {nested}, "containers":')


REFUSED = [
    _refused("replicas-a-million", _with("spec.replicaSpecs.Worker.replicas", 1_000_000), "less than or equal to 1000"),
    Hostile(
        "replicas-1e300",
        json.dumps(job()).replace('"replicas": 2', '"replicas": 1e300'),
        "must be of type integer",
    ),
    _refused("replicas-a-string", _with("spec.replicaSpecs.Worker.replicas", "two"), "must be of type integer"),
    _refused("replicas-negative-huge", _with("spec.replicaSpecs.Worker.replicas", -(2**62)), "greater than or equal"),
    _refused("deadline-past-int32", _with("spec.runPolicy.activeDeadlineSeconds", 2**40), "less than or equal to"),
    _refused("name-unicode", _with("metadata.name", "тренировка"), "metadata.name"),
    _refused("name-300-characters", _with("metadata.name", "a" * 300), "metadata.name"),
    _refused("name-emoji", _with("metadata.name", "job-🚀"), "metadata.name"),
    _refused("replica-specs-a-string", _with("spec.replicaSpecs", "Worker"), "must be of type object"),
    _refused(
        "replica-specs-a-list",
        _with("spec.replicaSpecs", [{"Worker": 1}]),
        "must be of type object",
        by_api_server='unknown field "spec.replicaSpecs[0].Worker"',
    ),
    _refused("template-a-list", _with("spec.replicaSpecs.Worker.template", []), "must be of type object"),
    _refused("port-a-string", _with("spec.port", "2222"), "must be of type integer"),
    _refused("run-policy-a-number", _with("spec.runPolicy", 5), "must be of type object"),
    _refused("containers-empty", _with("spec.replicaSpecs.Worker.template.spec.containers", []), "container"),
    _refused("containers-an-object", _with("spec.replicaSpecs.Worker.template.spec.containers", {}), "array"),
    _refused("container-without-name", _with(f"{_CONTAINER}.name", None), "name"),
    _refused("env-a-string", _with(f"{_CONTAINER}.env", "A=1"), "must be of type array"),
    _refused("unknown-type-unicode", _with("spec.replicaSpecs.Wörker", {"replicas": 1}), "Wörker"),
    Hostile(
        "nested-5000-deep",
        _deeply_nested(5000),
        "nested too deeply",
        expected_by_api_server="unknown field",
    ),
    _refused(
        "annotation-a-megabyte",
        _with("metadata.annotations", {"note": "x" * MEGABYTE}),
        "Too long: may not be more than 262144 bytes",
    ),
    _refused(
        "labels-a-megabyte-key",
        _with("metadata.labels", {"k" * MEGABYTE: "v"}),
        "metadata.labels",
    ),
]


def _as_root() -> dict[str, Any]:
    manifest = _with(f"{_CONTAINER}.securityContext.runAsNonRoot", False, job("as-root"))
    return _with(f"{_CONTAINER}.securityContext.runAsUser", 0, manifest)


# name -> (manifest, what the operator must make of it)
ACCEPTED_BY_THE_API_SERVER: dict[str, tuple[dict[str, Any], str]] = {
    # A megabyte in the spec: kopf once copied the spec into an annotation, past its 256 KiB limit.
    "env-a-megabyte": (
        _with(f"{_CONTAINER}.env", [{"name": "BIG", "value": "y" * MEGABYTE}], job("big-env")),
        "Running",
    ),
    # Pod Security refuses the pods (403); the job fails with the API server's reason.
    "runs-as-root": (_as_root(), "Failed"),
    # The CRD does not judge pod-template metadata; the pod's own validation refuses it (422).
    "pod-annotations-too-large": (
        _with("spec.replicaSpecs.Worker.template.metadata", {"annotations": {"a": "z" * 300_000}}, job("big-note")),
        "Failed",
    ),
}


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path below the root of a JSON value, parents before children."""
    found: list[Path] = []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in children:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


def dotted(path: Path) -> str:
    """A path as the validation and the API server print it: `spec.replicaSpecs.Worker.template.spec.containers[0]`."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else key)
    return text


def swapped(manifest: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    mutated = copy.deepcopy(manifest)
    node: Any = mutated
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return mutated


def refusals(message: str) -> list[tuple[str, str]]:
    """(where, why) of each line of a refusal of `disttrain render` after its first."""
    lines = [line.strip() for line in message.splitlines()[1:]]
    return [(where, why) for where, _, why in (line.partition(": ") for line in lines) if why]


def names_the_field(refused: list[tuple[str, str]], path: Path) -> bool:
    """A refusal names the changed field, something inside it, or an object that holds it (a rule of the
    object: `spec: MultiWorkerMirrored takes no PS`); a rule of the whole manifest names the field in its
    message, as the API server prints it (`<root>: metadata.name must be a DNS-1035 label`)."""
    target = dotted(path)
    return any(
        target in why
        if where in ("", "<root>")
        else where == target or target.startswith((f"{where}.", f"{where}[")) or where.startswith(target)
        for where, why in refused
    )
