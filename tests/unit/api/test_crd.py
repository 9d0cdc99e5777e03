"""The committed CRD is exactly what the models generate, and it is a valid structural schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from disttrain_core.api import crd
from support.repository import ROOT

# kubectl's client-side apply stores the whole object in an annotation limited to 256 KiB.
LAST_APPLIED_LIMIT = 256 * 1024


def _nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield from _nodes(schema[key], f"{path}[{key}]")


def test_committed_crd_matches_the_models() -> None:
    assert crd.drift(ROOT / "crds") is None


def test_crd_is_well_within_size_limits() -> None:
    compact = json.dumps(crd.custom_resource_definition(), separators=(",", ":"))
    assert len(compact) < LAST_APPLIED_LIMIT // 2


def test_pod_template_schema_is_embedded_once() -> None:
    text = json.dumps(crd.custom_resource_definition())
    assert text.count('"serviceAccountName"') == 1


def test_schema_is_structural() -> None:
    for path, node in _nodes(crd.openapi_schema()):
        assert "$ref" not in node, path
        assert "title" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
        untyped_ok = node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        assert "type" in node or untyped_ok, path


def test_every_rule_has_a_message() -> None:
    for path, node in _nodes(crd.openapi_schema()):
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["rule"] and rule["message"], path


def test_names_and_printer_columns() -> None:
    definition = crd.custom_resource_definition()
    names = definition["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == ("DistTrainJob", "disttrainjobs", ["dtj"])
    version = definition["spec"]["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = [column["name"] for column in version["additionalPrinterColumns"] if not column.get("priority")]
    assert columns == ["Phase", "Strategy", "Ready", "Restarts", "Step", "ETA", "Age"]


def test_every_numeric_bound_survives_the_api_servers_float_conversion() -> None:
    """The API server reads schema bounds as float64: past 2**53 an integer bound stops being an integer."""
    bounds: list[float] = []
    pending: list[object] = [crd.openapi_schema()]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            bounds += [node[key] for key in ("minimum", "maximum") if key in node]
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    assert bounds and all(abs(bound) <= 2**53 for bound in bounds)
