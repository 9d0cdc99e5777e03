"""Check a manifest against the generated CRD schema the way the API server does, without one.

Order as in the API server: nulls of non-nullable fields are pruned, defaults applied, the schema
checked (types, required fields, enums, bounds, patterns, unknown fields as with kubectl's strict
field validation), and only on a well-formed object the CEL rules are evaluated, with `self` bound
to the node each rule sits on (transition rules, which need the old object, apply to updates only).
The rules are the CRD's own text, so `render` and the API server give one verdict.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import cel

from disttrain_core.api import job as api
from disttrain_core.api.crd import openapi_schema
from disttrain_core.api.job import MAX_DNS_LABEL
from disttrain_core.api.rules import VALIDATIONS_KEY
from disttrain_core.api.spec import DNS_SUBDOMAIN_PATTERN, LABEL_NAME_PATTERN

Schema = dict[str, Any]


@dataclass(frozen=True)
class Violation:
    """One broken rule: where (a field path like the API server prints) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


class InvalidManifestError(ValueError):
    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("\n".join(str(violation) for violation in violations))


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


_TYPE_CHECKS: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _is_type(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPE_CHECKS[type_name])


def _type_name(value: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def _shown(value: Any, limit: int = 80) -> str:
    """A value as an error message quotes it: a megabyte string must not make a megabyte message."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _check_scalar(schema: Schema, value: Any, path: str, errors: list[Violation]) -> None:
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(f'"{item}"' for item in schema["enum"])
        errors.append(Violation(path, f'Unsupported value: "{_shown(value)}": supported values: {supported}'))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            bound = f"should be greater than or equal to {schema['minimum']}"
            errors.append(Violation(path, f"Invalid value: {_shown(value)}: {bound}"))
        if "maximum" in schema and value > schema["maximum"]:
            bound = f"should be less than or equal to {schema['maximum']}"
            errors.append(Violation(path, f"Invalid value: {_shown(value)}: {bound}"))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                Violation(path, f'Invalid value: "{value}": should be at least {schema["minLength"]} chars long')
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(Violation(path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(Violation(path, f"Invalid value: \"{_shown(value)}\": should match '{schema['pattern']}'"))


def _check_sizes(schema: Schema, value: dict[str, Any] | list[Any], path: str, errors: list[Violation]) -> None:
    low, high, noun = ("minProperties", "maxProperties", "properties")
    if isinstance(value, list):
        low, high, noun = ("minItems", "maxItems", "items")
    if low in schema and len(value) < schema[low]:
        errors.append(Violation(path, f"Invalid value: {len(value)}: should have at least {schema[low]} {noun}"))
    if high in schema and len(value) > schema[high]:
        errors.append(Violation(path, f"Too many: {len(value)}: must have at most {schema[high]} {noun}"))


def _check_object(schema: Schema, value: dict[str, Any], path: str, errors: list[Violation]) -> dict[str, Any]:
    properties: dict[str, Schema] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields", False)
    result: dict[str, Any] = {}
    for key, item in value.items():
        if item is None and not keep_unknown:
            continue  # pruned, as the API server does with null on a non-nullable field
        if key in properties:
            result[key] = checked(properties[key], item, _child(path, key), errors)
        elif isinstance(extra, dict):
            result[key] = checked(extra, item, _child(path, key), errors)
        elif keep_unknown or (not properties and extra is None):
            result[key] = item
        else:
            errors.append(Violation(_child(path, key), "unknown field"))
    for key, child in properties.items():
        if key not in result and "default" in child:
            result[key] = checked(child, copy.deepcopy(child["default"]), _child(path, key), errors)
    for key in schema.get("required", []):
        if key not in result:
            errors.append(Violation(_child(path, key), "Required value"))
    _check_sizes(schema, result, path, errors)
    return result


def checked(schema: Schema, value: Any, path: str, errors: list[Violation]) -> Any:
    """The value with defaults applied; schema violations are appended to `errors`."""
    if schema.get("x-kubernetes-int-or-string"):
        if not (_is_type(value, "integer") or _is_type(value, "string")):
            errors.append(Violation(path, f'Invalid value: "{_type_name(value)}": must be an integer or a string'))
        return value
    expected = schema.get("type")
    if expected is None:
        return value
    if not _is_type(value, expected):
        errors.append(Violation(path, f'Invalid value: "{_type_name(value)}": must be of type {expected}'))
        return value
    if expected == "object":
        return _check_object(schema, value, path, errors)
    if expected == "array":
        _check_sizes(schema, value, path, errors)
        items = schema.get("items", {})
        return [checked(items, item, f"{path}[{index}]", errors) for index, item in enumerate(value)]
    _check_scalar(schema, value, path, errors)
    return value


@cache
def _program(rule: str) -> cel.Program:
    return cel.compile(rule)


def _evaluate_rules(schema: Schema, value: Any, path: str, errors: list[Violation]) -> None:
    for rule in schema.get(VALIDATIONS_KEY, []):
        if "oldSelf" in rule["rule"]:
            continue  # a transition rule: only updates have an old object, as in the API server
        try:
            holds = _program(rule["rule"]).execute({"self": value})
        except Exception as error:  # a rule that cannot evaluate rejects, as in the API server
            errors.append(Violation(path, f"{rule['message']} (rule could not be evaluated: {error})"))
            continue
        if holds is not True:
            errors.append(Violation(path, rule["message"]))
    if isinstance(value, dict):
        properties: dict[str, Schema] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if child is not None:
                _evaluate_rules(child, item, _child(path, key), errors)
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            _evaluate_rules(schema["items"], item, f"{path}[{index}]", errors)


def _check_identity(manifest: Any) -> list[Violation]:
    if not isinstance(manifest, dict):
        return [Violation("", f"a manifest must be a mapping, not {_type_name(manifest)}")]
    errors = []
    if manifest.get("apiVersion") != api.API_VERSION:
        errors.append(Violation("apiVersion", f'must be "{api.API_VERSION}", not {manifest.get("apiVersion")!r}'))
    if manifest.get("kind") != api.KIND:
        errors.append(Violation("kind", f'must be "{api.KIND}", not {manifest.get("kind")!r}'))
    metadata = manifest.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        errors.append(Violation("metadata", f"Invalid type: must be an object, not {_type_name(metadata)}"))
    elif not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        errors.append(Violation("metadata.name", "Required value: a DistTrainJob needs a name"))
    else:
        errors.extend(_check_metadata(metadata))
    return errors


MAX_ANNOTATIONS_BYTES = 256 * 1024  # the API server's limit on all of an object's annotations together
_LABEL_NAME = re.compile(LABEL_NAME_PATTERN)
_DNS_SUBDOMAIN = re.compile(DNS_SUBDOMAIN_PATTERN)


def _check_metadata(metadata: dict[str, Any]) -> list[Violation]:
    """The API server's checks of labels and annotations, which no CRD schema states."""
    errors = [
        Violation(f"metadata.{field}", "must be a map of strings to strings")
        for field in ("labels", "annotations")
        if metadata.get(field) is not None and not _string_map(metadata[field])
    ]
    if metadata.get("namespace") is not None and not isinstance(metadata["namespace"], str):
        errors.append(Violation("metadata.namespace", "must be a string"))
    if errors:
        return errors
    annotations, labels = metadata.get("annotations"), metadata.get("labels")
    if annotations and _annotations_size(annotations) > MAX_ANNOTATIONS_BYTES:
        message = f"Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"
        errors.append(Violation("metadata.annotations", message))
    for key, value in (labels or {}).items():
        problem = _label_key_problem(str(key)) or _label_value_problem(value)
        if problem:
            errors.append(Violation("metadata.labels", f'Invalid value: "{_shown(key)}": {problem}'))
    return errors


def _label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters"
    return _label_value_problem(name, part="name part") if name else "name part must be non-empty"


def _label_value_problem(value: Any, part: str = "a label value") -> str | None:
    if not isinstance(value, str):
        return f"{part} must be a string"
    if len(value) > MAX_DNS_LABEL:
        return f"{part} must be no more than {MAX_DNS_LABEL} characters"
    if value and not _LABEL_NAME.fullmatch(value):
        return f"{part} must consist of alphanumeric characters, '-', '_' or '.', and start and end with one"
    return None


def _string_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())


def _annotations_size(annotations: dict[Any, Any]) -> int:
    return sum(len(str(key).encode()) + len(str(value).encode()) for key, value in annotations.items())


def spec_violations(spec: Any) -> list[Violation]:
    """The spec against the CRD's structural schema (types, required fields, enums, bounds) without its CEL
    rules: what the builders rely on, cheap enough for the operator to check each generation it acts on."""
    errors: list[Violation] = []
    checked(openapi_schema()["properties"]["spec"], spec, "spec", errors)
    return errors


def validated(manifest: Any) -> dict[str, Any]:
    """The manifest with the CRD's defaults applied, or InvalidManifestError naming every violation."""
    errors = _check_identity(manifest)
    if errors:
        raise InvalidManifestError(errors)
    schema = openapi_schema()
    document: dict[str, Any] = checked(schema, manifest, "", errors)
    if not errors:
        _evaluate_rules(schema, document, "", errors)
    if errors:
        raise InvalidManifestError(errors)
    return document
