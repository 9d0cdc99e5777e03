"""Turn Kubernetes' published OpenAPI v3 document into the PodTemplateSpec schema the CRD embeds.

Run by hand when the Kubernetes pin moves; the output is committed beside this module. The input is
`k8s.io/kubernetes/api/openapi-spec/v3/api__v1_openapi.json`, in the module (the local cluster's build
puts it in the Go module cache). The result is a structural schema: references inlined, descriptions,
defaults and merge hints dropped (they only grow the CRD), quantities and int-or-string fields made
`x-kubernetes-int-or-string`, and embedded ObjectMeta reduced to what a template may set.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION

Schema = dict[str, Any]

_PREFIX = "#/components/schemas/"
_KEPT_KEYS = ("type", "required", "enum")
_INT_OR_STRING: Schema = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
_STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_SPECIAL: dict[str, Schema] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": _INT_OR_STRING,
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": _INT_OR_STRING,
    "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    # Like controller-gen's generateEmbeddedObjectMeta: the fields a pod template may carry.
    "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "labels": _STRING_MAP,
            "annotations": _STRING_MAP,
            "finalizers": {"type": "array", "items": {"type": "string"}},
        },
    },
}
ROOT = "io.k8s.api.core.v1.PodTemplateSpec"
SCHEMA_FILE = Path(__file__).with_name("schemas") / f"pod_template_spec_{KUBERNETES_VERSION}.json"


def _reference(node: Schema) -> str | None:
    if "$ref" in node:
        return str(node["$ref"]).removeprefix(_PREFIX)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).removeprefix(_PREFIX)
    return None


def structural(node: Schema, components: dict[str, Schema], trail: tuple[str, ...] = ()) -> Schema:
    """One node of the upstream schema as a compact structural schema."""
    name = _reference(node)
    if name is not None:
        if name in _SPECIAL:
            return dict(_SPECIAL[name])
        if name in trail:
            raise ValueError(f"recursive schema {' -> '.join((*trail, name))} cannot be inlined")
        return structural(components[name], components, (*trail, name))
    if node.get("format") == "int-or-string":
        return dict(_INT_OR_STRING)
    result: Schema = {key: node[key] for key in _KEPT_KEYS if key in node}
    if "properties" in node:
        result["properties"] = {
            key: structural(value, components, trail) for key, value in sorted(node["properties"].items())
        }
    if "items" in node:
        result["items"] = structural(node["items"], components, trail)
    if isinstance(node.get("additionalProperties"), dict):
        result["additionalProperties"] = structural(node["additionalProperties"], components, trail)
    if "type" not in result and "properties" in result:
        result["type"] = "object"
    return result


def pod_template_schema(openapi: Schema) -> Schema:
    components: dict[str, Schema] = openapi["components"]["schemas"]
    return structural(components[ROOT], components, (ROOT,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("openapi", type=Path, help="api__v1_openapi.json of the pinned k8s.io/kubernetes")
    args = parser.parse_args()
    schema = pod_template_schema(json.loads(args.openapi.read_text()))
    SCHEMA_FILE.parent.mkdir(exist_ok=True)
    SCHEMA_FILE.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
    print(f"{SCHEMA_FILE}: {SCHEMA_FILE.stat().st_size} bytes")


if __name__ == "__main__":
    main()
