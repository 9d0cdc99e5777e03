"""A mutation fuzzer over the structure of real manifests: any value of any example or valid corpus
manifest, swapped for a value of another JSON type. The outcome is asserted on both layers that read
users' manifests: `disttrain render` refuses with a message naming the field (or the object holding it)
and the rule, or renders every pod; the operator fails the job with InvalidSpec naming the field, or
creates its children. Neither ever raises anything else."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disttrain_cli.render import RenderError, render_objects
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.managers import managed_elsewhere
from disttrain_operator.reconciler import Reconciler
from support.fakes import RecordingApi
from support.hostile import Path, dotted, names_the_field, paths, refusals, swapped
from support.repository import EXAMPLES, VALID_CORPUS, load_one

MANIFESTS = [load_one(path) for path in [*EXAMPLES, *VALID_CORPUS]]

SWAPS: dict[type, list[Any]] = {
    type(None): [0, "x", [], {}],
    bool: [None, "true", 1, []],
    int: [None, "1", 1.5, True, [1], {"a": 1}],
    float: [None, "0.5", [0.5]],
    str: [None, 5, True, ["x"], {"x": "y"}],
    list: [None, "a", 3, {"0": 1}],
    dict: [None, 5, "x", [1], True],
}


@st.composite
def type_swaps(draw: st.DrawFn, under: Path = ()) -> tuple[dict[str, Any], Path, Any]:
    manifest = draw(st.sampled_from(MANIFESTS))
    path = draw(st.sampled_from([p for p in paths(manifest) if p[: len(under)] == under]))
    node: Any = manifest
    for key in path:
        node = node[key]
    return manifest, path, draw(st.sampled_from(SWAPS[type(node)]))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(type_swaps())
def test_render_refuses_a_type_swap_by_name_or_renders_every_pod(swap: tuple[dict[str, Any], Path, Any]) -> None:
    manifest, path, value = swap
    mutated = swapped(manifest, path, value)
    try:
        objects = render_objects(json.dumps(mutated), BuildSettings())
    except RenderError as error:
        assert names_the_field(refusals(str(error)), path), (dotted(path), value, str(error))
        return
    specs = [spec for spec in mutated["spec"]["replicaSpecs"].values() if spec is not None]  # null is absent
    counts = [1 if spec.get("replicas") is None else spec["replicas"] for spec in specs]  # the default is 1
    pods = [item for item in objects if item["kind"] == "Pod"]
    assert len(pods) == sum(counts), (dotted(path), value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(type_swaps(under=("spec",)))
def test_the_operator_fails_a_swapped_spec_by_name_or_acts_on_it(swap: tuple[dict[str, Any], Path, Any]) -> None:
    """What reaches the operator passed the API server, unless its CRD is older than the operator: either way
    the reconcile fails the job with a reason users can read, or creates its children."""
    manifest, path, value = swap
    body = swapped(manifest, path, value)
    body["metadata"] = {**body["metadata"], "namespace": "default", "uid": "u1", "generation": 1}
    api = RecordingApi()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    Reconciler(api, BuildSettings(), lambda *_, **__: None, clock=lambda: now).reconcile(body, [], [])
    if managed_elsewhere(body):  # another manager's job: nothing written
        assert (api.created, api.statuses) == ([], []), dotted(path)
        return
    if api.created:
        return
    (status,) = api.statuses
    (failed,) = [condition for condition in status["conditions"] if condition["type"] == "Failed"]
    assert failed["reason"] == "InvalidSpec"
    assert dotted(path[1:]).split("[")[0].split(".")[0] in failed["message"], (dotted(path), failed["message"])
