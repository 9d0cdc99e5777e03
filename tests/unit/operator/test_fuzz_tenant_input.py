"""A fuzzer over every kind of object the operator reads that others can write: pod annotations, labelled
ConfigMaps, termination messages and progress answers, TFJobs, Kueue Workloads, watched objects, Events,
quantities. Each asserts an outcome: values stay in their bounds, what the API server is sent is valid
JSON, a watch keeps every other object in sight, and another job beside the hostile one still progresses."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disttrain.client import _count
from disttrain_contract.kept_logs import DEFAULT_LOG_BYTES
from disttrain_core import kept_logs
from disttrain_core.api.quantity import MAX_QUANTITY, QuantityError, parse_quantity
from disttrain_core.api.spec import MAX_ATTEMPT, MAX_LOG_BYTES, MAX_SECONDS, MIN_LOG_BYTES
from disttrain_core.api.status import DistTrainJobStatus
from disttrain_core.api.tenant_input import JOB_GONE_SINCE, LOG_MAX_BYTES, LOG_TTL, KeptLogNotes, PodLogNotes
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.managers import managed_elsewhere
from disttrain_core.naming import JOB_NAME_LABEL
from disttrain_core.progress import parse_evaluation, parse_report
from disttrain_operator.reconciler import Reconciler
from disttrain_operator.status_writer import dump_status
from disttrain_operator.watch import Listings, ObjectStore, ObjectWatch, Reconnects, WatchScope
from disttrain_operator.watched import WORKLOADS
from support.fakes import RecordingApi
from support.hostile import job

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
NUMBERS_AS_TEXT = st.sampled_from(["-1", "0", "1023", "1024", "786432", "786433", "2147483647", "1e3", " 5", "\u0661"])
TIMES = st.sampled_from(
    ["2026-11-26T11:59:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-11-26T11:00:00", "x"]
)
ANNOTATIONS = st.dictionaries(
    st.sampled_from([LOG_MAX_BYTES, LOG_TTL, JOB_GONE_SINCE, kept_logs.KEPT_AT, "disttrain.io/attempt", "other"]),
    NUMBERS_AS_TEXT | TIMES | st.text(max_size=40) | st.integers(),
)


@FUZZ
@given(ANNOTATIONS)
def test_any_log_notes_on_a_pod_stay_within_the_spec_s_bounds(annotations: dict[str, Any]) -> None:
    notes = PodLogNotes.of({"annotations": annotations})
    assert MIN_LOG_BYTES <= notes.max_bytes <= MAX_LOG_BYTES and 0 <= notes.ttl_seconds <= MAX_SECONDS
    assert notes.attempt is None or 1 <= notes.attempt <= MAX_ATTEMPT  # a new pod of its index is one more
    written = annotations.get(LOG_MAX_BYTES)
    if isinstance(written, str) and written.isascii() and written.strip().isdigit():
        in_bounds = MIN_LOG_BYTES <= int(written) <= MAX_LOG_BYTES
        assert notes.max_bytes == (int(written) if in_bounds else DEFAULT_LOG_BYTES)


KEPT = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.text(min_size=1, max_size=8), "namespace": st.just("team")},
            optional={
                "labels": st.dictionaries(
                    st.sampled_from([kept_logs.JOB_UID_LABEL, "x"]), st.sampled_from(["live", "gone"])
                ),
                "annotations": ANNOTATIONS | JSON,
            },
        )
    }
)


@FUZZ
@given(st.lists(KEPT, max_size=8))
def test_a_sweep_over_any_kept_logs_deletes_only_those_whose_ttl_ran_out(items: list[dict[str, Any]]) -> None:
    found = kept_logs.sweep(items, {"live"}, NOW)
    for item in found.delete:
        notes = KeptLogNotes.of(item["metadata"])
        gone_since = notes.gone_since(NOW)
        assert gone_since is not None and gone_since + timedelta(seconds=notes.ttl_seconds) <= NOW
        assert (item["metadata"].get("labels") or {}).get(kept_logs.JOB_UID_LABEL) != "live"
    assert all(KeptLogNotes.of(item["metadata"]).job_gone_since is None for item in found.mark)


REPORTS = JSON.map(
    lambda value: json.dumps(
        {"step": 3, "loss": value, "evaluation": {"metrics": {"m": value}}, "checkpoint": value, "stepsPerSecond": 1}
    )
)
REPORTS |= JSON.map(lambda value: json.dumps({"step": 3, "checkpoint": {"step": 2, "path": value, "time": value}}))
REPORTS |= st.sampled_from(['{"step": 1, "loss": NaN}', '{"evaluation": {"metrics": {"a": Infinity, "b": 0.5}}}'])


@FUZZ
@given(REPORTS | st.text(max_size=200))
def test_any_report_reaches_the_status_as_json_the_api_server_takes(text: str) -> None:
    """Whatever a trainer reports, the status holds it within its bounds, or leaves it out; the operator's own
    readings (the rate, the time left) are never the trainer's."""
    report = parse_report(text)
    progress, checkpoint = (report.progress, report.checkpoint) if report else (None, None)
    status = DistTrainJobStatus(progress=progress, checkpoint=checkpoint, evaluation=parse_evaluation(text))
    sent = json.loads(json.dumps(dump_status(status), allow_nan=False))  # NaN and Infinity are no JSON
    for value in (sent.get("evaluation") or {}).get("metrics", {}).values():
        assert math.isfinite(value)
    assert "stepsPerSecond" not in (sent.get("progress") or {})
    assert len((sent.get("checkpoint") or {}).get("path") or "") <= 1024


def _neighbour() -> dict[str, Any]:
    body = job("neighbour")
    body["metadata"].update(namespace="team", uid="neighbour-uid", generation=1)
    return {**body, "status": {}}


TFJOBS = st.fixed_dictionaries(
    {
        "apiVersion": st.just("kubeflow.org/v1"),
        "kind": st.just("TFJob"),
        "metadata": st.just({"name": "hostile", "namespace": "team", "uid": "hostile-uid", "generation": 1}),
        "spec": st.fixed_dictionaries(
            {
                "tfReplicaSpecs": st.dictionaries(
                    st.sampled_from(["Worker", "worker", "Master", "PS", "Evaluator", "Chief", "Dynamic"]),
                    st.fixed_dictionaries(
                        {"template": st.just({"spec": {"containers": [{"name": "tensorflow", "image": "t"}]}})},
                        optional={"replicas": st.integers(-2, 5) | SCALARS, "restartPolicy": SCALARS},
                    )
                    | JSON,
                    max_size=3,
                )
            },
            optional={
                "runPolicy": st.dictionaries(
                    st.sampled_from(["backoffLimit", "suspend", "cleanPodPolicy", "managedBy", "x"]),
                    SCALARS | st.sampled_from(["kueue.x-k8s.io/multikueue", "kubeflow.org/training-operator"]),
                )
                | JSON,
                "enableDynamicWorker": SCALARS,
                "successPolicy": SCALARS,
            },
        ),
        "status": st.just({}) | JSON,
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TFJOBS)
def test_a_tfjob_of_any_shape_is_run_or_failed_and_the_job_beside_it_progresses(body: dict[str, Any]) -> None:
    api = RecordingApi()
    reconciler = Reconciler(api, BuildSettings(), lambda *_, **__: None, clock=lambda: NOW)
    reconciler.reconcile(body, [], [])
    for status in api.statuses:
        json.dumps(status, allow_nan=False)
    hostile = [status for status, kind in zip(api.statuses, api.status_kinds, strict=True) if kind == "TFJob"]
    if managed_elsewhere(body):  # another manager's: left alone, nothing written
        assert (hostile, api.created) == ([], [])
    else:
        assert hostile or any(item.startswith("Pod/hostile-") for item in api.created)  # failed saying why, or run
    before = len(api.created)
    reconciler.reconcile(_neighbour(), [], [])
    assert any(item.startswith("Pod/neighbour-") for item in api.created[before:])


WORKLOAD_BODIES = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {"name": st.text(max_size=8), "namespace": st.just("team"), "uid": st.text(min_size=1, max_size=8)},
            optional={"labels": st.just({JOB_NAME_LABEL: "j"}) | JSON},
        ),
    },
    optional={
        "spec": JSON | st.fixed_dictionaries({"podSets": JSON}),
        "status": JSON
        | st.fixed_dictionaries(
            {
                "admission": JSON | st.fixed_dictionaries({"podSetAssignments": JSON}),
                "admissionChecks": JSON,
                "conditions": JSON,
            }
        ),
    },
)


@FUZZ
@given(WORKLOAD_BODIES)
def test_a_workload_of_any_shape_is_read_or_left_out_and_its_watch_sees_the_rest(body: dict[str, Any]) -> None:
    """Kueue writes Workloads; whatever one holds, the watch reads it or leaves it out, never all of them."""
    store: ObjectStore[Any] = ObjectStore()
    watch: ObjectWatch[Any] = ObjectWatch(
        cast(Any, None),
        WORKLOADS,
        store,
        [WatchScope(None)],
        lambda *_: None,
        listings=Listings(),
        reconnects=Reconnects(),
    )
    fine = {"metadata": {"name": "fine", "namespace": "team", "uid": "\0fine", "labels": {JOB_NAME_LABEL: "k"}}}
    watch._apply(WatchScope(None), "ADDED", body)
    watch._apply(WatchScope(None), "ADDED", fine)
    assert [view.name for view in store.views(("team", "k"))] == ["fine"]  # seen, whatever came before it


@FUZZ
@given(st.text(max_size=24) | st.integers() | st.floats() | st.booleans() | st.none())
def test_any_quantity_is_read_within_bounds_or_refused_by_name(value: Any) -> None:
    try:
        parsed = parse_quantity(value)
    except QuantityError as error:
        assert len(str(error)) < 200
        return
    assert isinstance(parsed, Decimal) and abs(parsed) <= MAX_QUANTITY


@given(st.integers(0, 10**6), st.sampled_from(["", "m", "k", "Ki", "Mi", "Gi", "Pi", "Ei", "n", "u", "E", "e3"]))
def test_a_quantity_means_what_kubernetes_says_it_means(number: int, suffix: str) -> None:
    scale: dict[str, Decimal | int] = {"": 1, "m": Decimal("0.001"), "k": 1000, "Ki": 1024, "Mi": 1024**2,
        "Gi": 1024**3, "Pi": 1024**5, "Ei": 1024**6, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "E": 10**18,
        "e3": 1000}  # fmt: skip
    expected = Decimal(number) * Decimal(scale[suffix])
    if expected > MAX_QUANTITY:
        return
    assert parse_quantity(f"{number}{suffix}") == expected


@given(JSON)
def test_an_event_count_anyone_wrote_is_a_positive_number(value: Any) -> None:
    assert _count(value) >= 1
