"""Hostile input: every malformed manifest gets a clear, bounded error; nothing crashes.

The same manifests go to the real API server in tests/integration/test_hostile_submissions.py.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disttrain_cli.render import RenderError, render
from disttrain_core.api import yaml_io
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.status import MAX_COUNT
from disttrain_core.api.validation import InvalidManifestError, validated
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import desired_objects
from disttrain_core.naming import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL, pod_name
from disttrain_core.observed import own_pods, pod_view
from disttrain_core.planner import plan
from disttrain_core.progress import parse_progress
from disttrain_core.status_from_pods import aggregated
from support.hostile import ACCEPTED_BY_THE_API_SERVER, REFUSED, Hostile, job, names_the_field

MESSAGE_LIMIT = 4096  # an error quotes what it refuses, never a megabyte of it


@pytest.mark.parametrize("hostile", REFUSED, ids=lambda hostile: hostile.name)
def test_hostile_manifests_are_refused_with_a_clear_short_message(hostile: Hostile) -> None:
    with pytest.raises(RenderError) as raised:
        render(hostile.text, BuildSettings())
    assert hostile.expected in str(raised.value)
    assert len(str(raised.value)) < MESSAGE_LIMIT


@pytest.mark.parametrize("name", ACCEPTED_BY_THE_API_SERVER)
def test_what_the_api_server_accepts_renders(name: str) -> None:
    manifest, _ = ACCEPTED_BY_THE_API_SERVER[name]
    pods = [item for item in yaml_io.load_all(render(json.dumps(manifest), BuildSettings())) if item["kind"] == "Pod"]
    assert len(pods) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("a: " + "9" * 5000, "Exceeds the limit (4300 digits)"),
        ("a: &a [*a]", "expand to more than 1000000 values"),  # an alias that contains itself
        (  # a billion laughs: nine levels of ten aliases each
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
            "expand to more than 1000000 values",
        ),
        ("a: !!python/object/apply:os.system [true]", "could not determine a constructor"),
        ("\x00", "unacceptable character"),
    ],
    ids=["deep", "huge-integer", "self-alias", "billion-laughs", "python-tag", "nul"],
)
def test_the_reader_refuses_what_would_exhaust_it(text: str, message: str) -> None:
    with pytest.raises(RenderError, match="broken YAML") as raised:
        render(text, BuildSettings())
    assert message in str(raised.value)


def test_json_with_a_key_longer_than_yaml_allows_is_read_as_json() -> None:
    (document,) = yaml_io.load_all(json.dumps({"k" * 2000: 1}))
    assert document == {"k" * 2000: 1}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
# Reports with a step of any kind, beside any other field: the branch where a message is taken for a report.
REPORTS = st.fixed_dictionaries(
    {"step": JSON_VALUES | st.integers()},
    optional={
        "total_steps": JSON_VALUES | st.integers(),
        "update_time": st.sampled_from(["2026-01-01T00:00:00", "2026-01-01T00:00:00Z", "yesterday", ""]),
        "loss": JSON_VALUES,
    },
)
PATHS = [
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "labels"),
    ("spec",),
    ("spec", "strategy"),
    ("spec", "port"),
    ("spec", "progressPort"),
    ("spec", "runPolicy"),
    ("spec", "runPolicy", "backoffLimit"),
    ("spec", "runPolicy", "activeDeadlineSeconds"),
    ("spec", "runPolicy", "schedulingPolicy"),
    ("spec", "checkpoint"),
    ("spec", "replicaSpecs"),
    ("spec", "replicaSpecs", "Worker"),
    ("spec", "replicaSpecs", "PS"),
    ("spec", "replicaSpecs", "Worker", "replicas"),
    ("spec", "replicaSpecs", "Worker", "restartPolicy"),
    ("spec", "replicaSpecs", "Worker", "template"),
    ("spec", "replicaSpecs", "Worker", "template", "spec"),
    ("spec", "replicaSpecs", "Worker", "template", "spec", "containers"),
    ("spec", "replicaSpecs", "Worker", "template", "spec", "containers", 0),
    ("spec", "replicaSpecs", "Worker", "template", "spec", "containers", 0, "env"),
    ("spec", "replicaSpecs", "Worker", "template", "spec", "containers", 0, "ports"),
]


def _set(manifest: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    node: Any = manifest
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES), min_size=1, max_size=3))
def test_any_value_anywhere_is_refused_cleanly_or_builds(changes: list[tuple[tuple[str | int, ...], Any]]) -> None:
    """Validation either names what is wrong or hands on a job that the models parse and the builders render."""
    manifest = job()
    manifest["spec"]["runPolicy"] = {"schedulingPolicy": {}}
    manifest["spec"]["checkpoint"] = {"size": "1Gi"}
    for path, value in changes:
        with contextlib.suppress(TypeError, KeyError, IndexError):  # an earlier change removed the path
            _set(manifest, path, value)
    try:
        document = validated(manifest)
    except InvalidManifestError as error:
        assert len(str(error)) < 64 * MESSAGE_LIMIT
        refused = [(violation.path, violation.message) for violation in error.violations]
        assert any(names_the_field(refused, path) for path, _ in changes), (changes, str(error))
        return
    pods = [item for item in desired_objects(parse_job(document), BuildSettings()) if item["kind"] == "Pod"]
    assert pods and all(pod["metadata"]["name"].startswith("hostile-") for pod in pods)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_renders_or_is_refused(text: str) -> None:
    try:
        rendered = render(text, BuildSettings())
    except RenderError as error:
        assert str(error).startswith(("broken YAML", "no DistTrainJob", "document ")), str(error)
        return
    assert rendered.startswith("---")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | JSON_VALUES.map(json.dumps) | REPORTS.map(json.dumps))
def test_any_termination_message_is_a_report_or_nothing(text: str) -> None:
    """A trainer's (or an impostor's) termination message or HTTP answer never breaks the operator: it is a report
    only where it is a JSON object naming a step, and then a whole one."""
    progress = parse_progress(text)
    if progress is None:
        return
    record = json.loads(text)
    assert isinstance(record, dict) and "step" in record, text
    assert progress.step is None or 0 <= progress.step <= MAX_COUNT, progress
    assert progress.update_time is None or progress.update_time.tzinfo is not None, progress


LABEL_VALUES = st.sampled_from(["worker", "ps", "chief", "0", "1", "-1", "999999999", "07"]) | st.text(max_size=8)
POD_NAMES = st.sampled_from(["hostile-worker-0", "hostile-worker-1", "hostile-ps-0"]) | st.text(max_size=20)
TERMINATED = st.fixed_dictionaries(
    {"exitCode": st.integers(-(2**31), 2**31 - 1)},
    optional={"message": st.text(max_size=200) | JSON_VALUES.map(json.dumps), "reason": st.text(max_size=20)},
)
PODS = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {
                "name": POD_NAMES,
                "uid": st.text(max_size=8),
            },
            optional={
                "labels": st.dictionaries(
                    st.sampled_from([REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL, JOB_NAME_LABEL]), LABEL_VALUES
                ),
                "deletionTimestamp": st.sampled_from(["2026-01-01T00:00:00Z", "not a time", ""]),
            },
        ),
        "status": st.fixed_dictionaries(
            {},
            optional={
                "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "Exploded"]),
                "podIP": st.sampled_from(["10.0.0.1", "", "::1", "not an address"]),
                "reason": st.text(max_size=10),
                "containerStatuses": st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from(["tensorflow", "sidecar"]), "restartCount": st.integers(0, 2**31)},
                        optional={"state": st.fixed_dictionaries({"terminated": TERMINATED})},
                    ),
                    max_size=3,
                ),
            },
        ),
    }
)


@settings(max_examples=300, deadline=None)
@given(PODS)
def test_any_pod_gives_a_view_or_none(body: dict[str, Any]) -> None:
    """A pod someone labelled by hand as a job's can hold any label values, messages and codes: it is a view only
    with a uid, a replica type and an index, and then says what the pod says."""
    view = pod_view(body)
    labels = body["metadata"].get("labels") or {}
    if view is None:
        return
    assert view.uid == body["metadata"]["uid"] != "" and view.name == body["metadata"]["name"], view
    assert view.replica_type.value.lower() == labels[REPLICA_TYPE_LABEL].lower(), (view, labels)
    assert view.index == int(labels[REPLICA_INDEX_LABEL]), (view, labels)
    assert view.exit_code is None or -(2**31) <= view.exit_code < 2**31, view


@settings(max_examples=300, deadline=None)
@given(st.lists(PODS, max_size=6))
def test_the_status_and_the_plan_survive_any_pods(bodies: list[dict[str, Any]]) -> None:
    """Hand-labelled impostors among a job's pods: negative or huge indexes, odd phases, any exit code."""
    parsed = parse_job({**job(), "metadata": {"name": "hostile", "namespace": "default", "uid": "u"}})
    pods = own_pods(parsed, [view for body in bodies if (view := pod_view(body)) is not None])
    now = datetime(2026, 1, 1, tzinfo=UTC)
    status = aggregated(parsed, pods, created=True, now=now).status
    decided = plan(parsed.model_copy(update={"status": status}), pods, [], BuildSettings(), now=now)
    assert status.restart_count >= 0 and all(count.active >= 0 for count in status.replica_statuses.values())
    seen = {pod.name for pod in pods}
    assert set(decided.delete) <= seen and set(decided.force_delete) <= seen, (decided, seen)
    own = {
        pod_name("hostile", kind, n) for kind in parsed.spec.replica_specs for n in range(parsed.spec.replicas(kind))
    }
    made = {manifest["metadata"]["name"] for manifest in decided.create if manifest["kind"] == "Pod"}
    assert made <= own - seen, (made, own, seen)  # only its own pods, and none that is there
