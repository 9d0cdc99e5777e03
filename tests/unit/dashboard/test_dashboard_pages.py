"""The dashboard's pages from the objects the API returns: list rows, a job's page, its curves, and
hostile text rendered as text (the browser test shows the same in Chromium)."""

from __future__ import annotations

from datetime import UTC, datetime

from disttrain import DistTrainJob, JobEvent
from disttrain_core.api.status import ProgressPoint
from disttrain_dashboard.app import job_page, row, templates
from disttrain_dashboard.curves import HEIGHT, WIDTH, curves
from support.job_builder import JobBuilder

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
HOSTILE = '<script>alert(1)</script><img src=x onerror="alert(2)">'
TEMPLATE = {"spec": {"containers": [{"name": "tensorflow", "image": "trainer"}]}}


def _job(**status: object) -> DistTrainJob:
    queued = {"creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"kueue.x-k8s.io/queue-name": "research"}}
    builder = JobBuilder("vision", "team").metadata(**queued).strategy("MultiWorkerMirrored").workers(2)
    return builder.status(**status).model()


def test_a_row_holds_what_the_list_shows() -> None:
    shown = row(_job(phase="Running", ready="2/2", restartCount=1, progress={"step": 7, "loss": 0.5}), NOW)
    assert shown == {
        "key": "DistTrainJob/team/vision",
        "href": "/jobs/DistTrainJob/team/vision",
        "kind": "DistTrainJob",
        "namespace": "team",
        "name": "vision",
        "phase": "Running",
        "ready": "2/2",
        "restarts": "1",
        "progress": "step 7 loss 0.5",
        "age": "60m",
        "queue": "research",
    }
    assert row(_job(), NOW)["phase"] == "Pending"  # a job the operator has not written yet


def test_curves_span_the_whole_drawing_and_need_two_reports() -> None:
    history = [ProgressPoint(step=step, loss=2.0 / step, examples_per_second=100.0) for step in (1, 2, 4, 8)]
    loss, throughput = curves(history)
    assert (loss.title, loss.first_step, loss.last_step, loss.high, loss.low) == ("loss", 1, 8, 2.0, 0.25)
    points = [tuple(map(float, pair.split(","))) for pair in loss.points.split()]
    assert all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for x, y in points)
    assert points[0][1] < points[-1][1]  # the loss falls: its line goes down the drawing
    assert throughput.title == "examples per second"  # a flat line is still drawn
    assert curves(history[:1]) == []
    assert [curve.title for curve in curves([ProgressPoint(step=1), ProgressPoint(step=2, loss=1.0)])] == []


def test_hostile_text_on_a_job_page_is_escaped() -> None:
    condition = {
        "type": "Failed",
        "status": "True",
        "reason": "ReplicaFailed",
        "message": HOSTILE,
        "lastTransitionTime": "2026-01-01T00:30:00Z",
    }
    job = _job(phase="Failed", conditions=[condition], checkpoint={"step": 40, "path": HOSTILE})  # the trainer's word
    event = JobEvent(NOW, "Warning", "Hostile", HOSTILE, "DistTrainJob/vision")
    pod = {"metadata": {"name": "vision-worker-0"}, "spec": {}, "status": {"phase": "Failed"}}
    html = templates.get_template("job_panel.html").render(job_page(job, [pod], [event], NOW))
    assert "<script>" not in html and "<img" not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3  # the condition, the checkpoint, the Event
    assert 'href="/jobs/DistTrainJob/team/vision/logs/worker-0"' in html


def test_a_job_page_shows_the_time_left_and_the_last_checkpoint() -> None:
    progress = {"step": 120, "totalSteps": 300, "stepsPerSecond": 2.125, "estimatedRemainingSeconds": 380}
    saved = {"step": 100, "time": "2026-01-01T00:00:00Z", "path": "ckpt/ckpt-100"}
    html = templates.get_template("job_panel.html").render(
        job_page(_job(progress=progress, checkpoint=saved), [], [], NOW)
    )
    assert '<dd id="eta">6m20s left at 2.125 steps/s</dd>' in html
    assert '<dd id="checkpoint">step 100 at 2026-01-01T00:00:00Z (ckpt/ckpt-100)</dd>' in html
