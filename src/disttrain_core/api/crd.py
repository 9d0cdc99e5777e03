"""Generate the CustomResourceDefinition from the pydantic models: the one source of truth.

Pydantic emits JSON Schema; the API server wants a structural schema. The fix-ups: references
inlined, `Optional` unions collapsed (absent instead of null), titles, property-name schemas and
boolean `additionalProperties` dropped (unknown fields are the API server's strict field validation's
to refuse), `None` defaults dropped. Everything else (types, bounds, enums, patterns, defaults,
descriptions, `x-kubernetes-*` extensions such as the CEL rules) passes through unchanged.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from disttrain_core.api import job as api
from disttrain_core.api import tfjob
from disttrain_core.api.rules import schema_rules
from disttrain_core.api.spec import ApiModel, DistTrainJobSpec
from disttrain_core.api.status import DistTrainJobStatus

Schema = dict[str, Any]

CRD_FILE = f"{api.GROUP}_{api.PLURAL}.yaml"
_DROPPED = {"title", "propertyNames", "$defs"}
_HEADER = "# Generated from the pydantic models by `disttrain crd generate`; do not edit by hand.\n"

# `kubectl get -o wide`: the Evaluator's last scored step and its accuracy (the trainer's metric).
EVALUATION_COLUMNS: list[Schema] = [
    {"name": "Eval-Step", "type": "integer", "jsonPath": ".status.evaluation.step", "priority": 1},
    {"name": "Eval-Accuracy", "type": "number", "jsonPath": ".status.evaluation.metrics.accuracy", "priority": 1},
]
PRINTER_COLUMNS: list[Schema] = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Strategy", "type": "string", "jsonPath": ".spec.strategy"},
    {"name": "Ready", "type": "string", "jsonPath": ".status.ready"},
    {"name": "Restarts", "type": "integer", "jsonPath": ".status.restartCount"},
    {"name": "Step", "type": "integer", "jsonPath": ".status.progress.step"},
    {
        "name": "ETA",
        "type": "integer",
        "jsonPath": ".status.progress.estimatedRemainingSeconds",
        "description": "Seconds of training left, at the rate of the last minute.",
    },
    {"name": "Epoch", "type": "integer", "jsonPath": ".status.progress.epoch", "priority": 1},
    {"name": "Loss", "type": "number", "jsonPath": ".status.progress.loss", "priority": 1},
    *EVALUATION_COLUMNS,
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def _without_null(branches: list[Schema]) -> list[Schema]:
    return [branch for branch in branches if branch.get("type") != "null"]


def structural(node: Any, definitions: dict[str, Schema]) -> Any:
    """One node of pydantic's JSON schema as a Kubernetes structural schema."""
    if isinstance(node, list):
        return [structural(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    reference = node.pop("$ref", None)
    if reference is not None:
        node = {**definitions[reference.rsplit("/", 1)[-1]], **node}
    branches = node.get("anyOf")
    if isinstance(branches, list) and len(_without_null(branches)) == 1 and len(branches) == 2:
        del node["anyOf"]
        node = {**_without_null(branches)[0], **node}
        if "$ref" in node:
            return structural(node, definitions)
    if node.get("default", ...) is None:
        del node["default"]
    if isinstance(node.get("additionalProperties"), bool):
        del node["additionalProperties"]  # structural schemas forbid it beside properties
    result: Schema = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            result[key] = {name: structural(child, definitions) for name, child in value.items()}
        elif key in ("items", "additionalProperties", "anyOf"):
            result[key] = structural(value, definitions)
        else:
            result[key] = value
    return result


def model_schema(model: type[ApiModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.get("$defs", {})
    return dict(structural(raw, definitions))


def _object_schema(description: str, spec: type[ApiModel], status: type[ApiModel]) -> Schema:
    """A custom resource's whole schema: its spec and status from the models."""
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": model_schema(spec),
            "status": model_schema(status),
        },
    }


def _definition(
    group: str, version: str, names: Schema, schema: Schema, *, columns: list[Schema], metadata: Schema
) -> Schema:
    """A namespaced CRD of one served and stored version with a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


@cache
def openapi_schema() -> Schema:
    """The whole object's schema, root-level CEL rules included."""
    schema = _object_schema("A distributed TensorFlow training job.", DistTrainJobSpec, DistTrainJobStatus)
    return {**schema, **schema_rules(*api.ROOT_RULES)}


# On what an uninstall leaves (docs/admins.md): `kubectl delete -k deploy/ -l 'disttrain.io/kept-on-uninstall!=true'`
# removes the operator and its rights, and leaves the CRDs, so users' jobs and their kept logs stay.
KEPT_ON_UNINSTALL = "disttrain.io/kept-on-uninstall"


def custom_resource_definition() -> Schema:
    names = {
        "kind": api.KIND,
        "listKind": f"{api.KIND}List",
        "plural": api.PLURAL,
        "singular": api.SINGULAR,
        "shortNames": list(api.SHORT_NAMES),
        "categories": ["all", "disttrain"],
    }
    metadata = {"name": f"{api.PLURAL}.{api.GROUP}", "labels": {KEPT_ON_UNINSTALL: "true"}}
    return _definition(api.GROUP, api.VERSION, names, openapi_schema(), columns=PRINTER_COLUMNS, metadata=metadata)


def render_crd() -> str:
    return _render(custom_resource_definition())


def _render(definition: Schema) -> str:
    return _HEADER + yaml.safe_dump(definition, sort_keys=False, width=1 << 16, allow_unicode=True)


TFJOB_FOLDER = "tfjob"
TFJOB_CRD_FILE = f"{tfjob.GROUP}_{tfjob.PLURAL}.yaml"
TFJOB_PRINTER_COLUMNS: list[Schema] = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Restarts", "type": "integer", "jsonPath": ".status.restartCount"},
    *EVALUATION_COLUMNS,
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
# Marks the TFJob CRD as disttrain's: the operator serves TFJobs only where this label says the CRD is its own.
CRD_OWNER_LABEL = "disttrain.io/crd-owner"


def tfjob_resource_definition() -> Schema:
    """TFJob's CRD as disttrain serves it (`--serve-tfjobs`): the same group, names and version as
    training-operator's, so manifests and clients keep working; labelled as disttrain's."""
    description = "A TensorFlow training job in Kubeflow's TFJob shape, run by disttrain."
    names = {
        "kind": tfjob.KIND,
        "listKind": f"{tfjob.KIND}List",
        "plural": tfjob.PLURAL,
        "singular": tfjob.SINGULAR,
        "categories": ["all", "kubeflow"],
    }
    metadata = {
        "name": f"{tfjob.PLURAL}.{tfjob.GROUP}",
        "labels": {CRD_OWNER_LABEL: "disttrain", KEPT_ON_UNINSTALL: "true"},
    }
    schema = _object_schema(description, tfjob.TFJobSpec, tfjob.TFJobStatus)
    return _definition(tfjob.GROUP, tfjob.VERSION, names, schema, columns=TFJOB_PRINTER_COLUMNS, metadata=metadata)


def render_tfjob_crd() -> str:
    return _render(tfjob_resource_definition())


def _kustomization(resource: str) -> str:
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [resource]}
    return _HEADER + yaml.safe_dump(kustomization, sort_keys=False)


def generated_files() -> dict[str, str]:
    """Every file of `crds/`: each CRD with a kustomization beside it, so `deploy/` and its overlays can
    include the folders. The TFJob CRD is in a folder of its own: only the TFJob overlay installs it."""
    return {
        CRD_FILE: render_crd(),
        "kustomization.yaml": _kustomization(CRD_FILE),
        f"{TFJOB_FOLDER}/{TFJOB_CRD_FILE}": render_tfjob_crd(),
        f"{TFJOB_FOLDER}/kustomization.yaml": _kustomization(TFJOB_CRD_FILE),
    }


def write(folder: Path) -> Path:
    for name, text in generated_files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder / CRD_FILE


def drift(folder: Path) -> str | None:
    """A message when the committed files are not what the models generate, else None."""
    for name, text in generated_files().items():
        path = folder / name
        if not path.is_file():
            return f"{path} is missing; run `disttrain crd generate`"
        if path.read_text() != text:
            return f"{path} differs from the models; run `disttrain crd generate` and commit the result"
    return None
