"""What `disttrain jobs` prints: pure functions from jobs, pods and Events to rich renderables.

The columns are kubectl's (`NAME ... AGE`, `-A` adds NAMESPACE, `-o wide` adds more); the phase is
coloured, and rich drops the colour where the output is not a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from disttrain import JobEvent
from disttrain_contract.timestamps import format_time
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import UnkeptLogs
from disttrain_core.summary import (
    age,
    checkpoint_text,
    eta_text,
    evaluation_text,
    phase_text,
    pod_state,
    progress_text,
    queue_text,
    ready_text,
    remaining_text,
    replicas_text,
    restarts_text,
)

Object = Mapping[str, Any]

COLUMNS = ("NAME", "PHASE", "READY", "RESTARTS", "PROGRESS", "ETA", "AGE")
WIDE_COLUMNS = ("STRATEGY", "REPLICAS", "QUEUE", "EVALUATION")
PHASE_STYLES = {
    "Succeeded": "green",
    "Running": "cyan",
    "Failed": "bold red",
    "Restarting": "yellow",
    "Pending": "yellow",
    "Queued": "magenta",
    "Suspended": "magenta",
}
_EVENT_STYLES = {"Warning": "yellow"}


def header(*, all_namespaces: bool, wide: bool) -> list[str]:
    return ["NAMESPACE"] * all_namespaces + list(COLUMNS) + list(WIDE_COLUMNS) * wide


def job_cells(job: DistTrainJob, *, all_namespaces: bool, wide: bool, now: datetime) -> list[Text]:
    """One job's row, in `header`'s order."""
    phase = phase_text(job)
    cells: list[str | Text] = [
        *[job.metadata.namespace] * all_namespaces,
        job.metadata.name,
        Text(phase, style=PHASE_STYLES.get(phase, "")),
        ready_text(job),
        restarts_text(job),
        progress_text(job),
        remaining_text(job),
        age(job.metadata.creation_timestamp, now),
    ]
    if wide:
        cells += [job.spec.strategy.value, replicas_text(job), queue_text(job), evaluation_text(job)]
    return [cell if isinstance(cell, Text) else Text(cell) for cell in cells]


def table(header_cells: Sequence[str], rows: Sequence[Sequence[str | Text]], *, widths: Sequence[int] = ()) -> Table:
    """kubectl's look: no borders, three spaces between columns; `widths` holds columns at least so wide."""
    grid = Table(box=None, pad_edge=False, padding=(0, 3, 0, 0), show_edge=False, header_style="bold")
    for number, name in enumerate(header_cells):
        grid.add_column(name, no_wrap=True, min_width=widths[number] if number < len(widths) else None)
    for row in rows:
        grid.add_row(*row)
    return grid


def jobs_table(jobs: Sequence[DistTrainJob], *, all_namespaces: bool, wide: bool, now: datetime) -> Table:
    ordered = sorted(jobs, key=lambda job: (job.metadata.namespace, job.metadata.name))
    rows = [job_cells(job, all_namespaces=all_namespaces, wide=wide, now=now) for job in ordered]
    return table(header(all_namespaces=all_namespaces, wide=wide), rows)


def _time(moment: datetime | None) -> str:
    return format_time(moment) if moment is not None else "-"


def describe(job: DistTrainJob, pods: Sequence[Object], events: Sequence[JobEvent]) -> RenderableType:
    """`disttrain jobs describe`: the job's fields, then its conditions, pods and Events as tables."""
    status = job.status
    phase = phase_text(job)
    fields = [
        ("Name", Text(job.metadata.name)),
        ("Namespace", Text(job.metadata.namespace)),
        ("Strategy", Text(job.spec.strategy.value)),
        ("Phase", Text(phase, style=PHASE_STYLES.get(phase, ""))),
        ("Replicas", Text(replicas_text(job))),
        ("Restarts", Text(restarts_text(job))),
        ("Progress", Text(progress_text(job))),
        ("Time left", Text(eta_text(job))),
        ("Checkpoint", Text(checkpoint_text(job))),
        ("Evaluation", Text(evaluation_text(job))),
        ("TensorBoard", Text(status.tensorboard.url if status.tensorboard else "-")),
        ("Started", Text(_time(status.start_time))),
        ("Completed", Text(_time(status.completion_time))),
    ]
    if status.last_disruption is not None:
        last = status.last_disruption
        fields.append(("Last disruption", Text(f"{_time(last.time)} {last.reason}: {last.message}")))
    if status.unkept_logs:  # attempts that went while no operator ran: said where users look
        fields.append(("Logs not kept", Text("; ".join(map(_unkept_text, status.unkept_logs)), style="yellow")))
    summary = Table.grid(padding=(0, 1))
    for name, value in fields:
        summary.add_row(Text(f"{name}:", style="bold"), value)
    conditions = [[c.type.value, c.status.value, c.reason, c.message] for c in status.conditions]
    pod_rows = [
        [
            pod["metadata"]["name"],
            pod_state(pod),
            pod["spec"].get("nodeName", "-"),
            pod.get("status", {}).get("podIP", "-"),
            str(sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses") or [])),
        ]
        for pod in sorted(pods, key=lambda pod: pod["metadata"]["name"])
    ]
    event_rows: list[list[str | Text]] = [
        [
            _time(event.time),
            Text(event.type, style=_EVENT_STYLES.get(event.type, "")),
            event.reason,
            event.object,
            event.message,
        ]
        for event in events
    ]
    return Group(
        summary,
        Text("\nConditions:", style="bold"),
        _indented(table(["TYPE", "STATUS", "REASON", "MESSAGE"], conditions)),
        Text("Pods:", style="bold"),
        _indented(table(["NAME", "STATE", "NODE", "IP", "RESTARTS"], pod_rows)),
        Text("Events:", style="bold"),
        _indented(table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], event_rows)),
    )


def _unkept_text(unkept: UnkeptLogs) -> str:
    first, last = unkept.first_attempt, unkept.last_attempt
    return f"{unkept.replica} attempt {first}" if first == last else f"{unkept.replica} attempts {first}-{last}"


def _indented(grid: Table) -> Table:
    outer = Table.grid(padding=(0, 0, 0, 2))
    outer.add_row(grid)
    return outer
