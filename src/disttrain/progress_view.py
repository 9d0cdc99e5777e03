"""`Client.wait(..., progress=True)`: one line of a job's progress (phase, step, loss, time left, from its
status), kept current as the wait sees the job change: a rich progress bar in a terminal, a display that
updates in place in a notebook, a bar beside it (IPython's own display and HTML's `<progress>`, which need no
widget library)."""

from __future__ import annotations

import html
import importlib
import sys
from datetime import timedelta
from typing import IO, Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from disttrain_core.api.job import DistTrainJob


def progress_line(job: DistTrainJob) -> str:
    """The name and phase, then what the status knows: the step of the total and the share done, loss, time left."""
    status = job.status
    progress = status.progress
    parts = [f"{job.metadata.name} {status.phase or 'Pending'}"]
    if progress is not None and progress.step is not None:
        step = f"step {progress.step}"
        if progress.total_steps:
            step += f"/{progress.total_steps} ({100 * progress.step // progress.total_steps}%)"
        details = [step]
        if progress.loss is not None:
            details.append(f"loss {progress.loss:.4f}")
        if progress.estimated_remaining_seconds is not None:
            details.append(f"{timedelta(seconds=progress.estimated_remaining_seconds)} left")
        parts.append(", ".join(details))
    return ": ".join(parts)


class ProgressView(Protocol):
    def show(self, job: DistTrainJob) -> None: ...

    def close(self) -> None: ...


def progress_html(job: DistTrainJob) -> str:
    """The line beside an HTML `<progress>` bar over the steps (indeterminate while the total is unknown)."""
    progress = job.status.progress
    total, step = (progress.total_steps, progress.step) if progress is not None else (None, None)
    bar = f'<progress value="{step or 0}" max="{total}"></progress>' if total else "<progress></progress>"
    return f"<div>{bar} <code>{html.escape(progress_line(job))}</code></div>"


class _NotebookLine:
    """A display updated in place: IPython's `display(..., display_id=True)` handle, a bar where HTML shows."""

    def __init__(self, display: Any) -> None:
        self._display = display
        self._handle: Any = None

    def show(self, job: DistTrainJob) -> None:
        text = {"text/plain": progress_line(job), "text/html": progress_html(job)}
        if self._handle is None:
            self._handle = self._display(text, raw=True, display_id=True)
        else:
            self._handle.update(text, raw=True)

    def close(self) -> None:
        """The last line stays as it was shown."""


class _TerminalBar:
    """rich's progress bar, over the job's steps where it knows its total, with the line beside it."""

    def __init__(self, out: IO[str]) -> None:
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), console=Console(file=out), transient=False
        )
        self._task: TaskID | None = None
        self._progress.start()

    def show(self, job: DistTrainJob) -> None:
        progress = job.status.progress
        total = progress.total_steps if progress is not None else None
        step = progress.step if progress is not None else None
        if self._task is None:
            self._task = self._progress.add_task(progress_line(job), total=total)
        self._progress.update(self._task, description=progress_line(job), total=total, completed=step or 0)

    def close(self) -> None:
        self._progress.stop()


def progress_view(out: IO[str] | None = None) -> ProgressView:
    """The notebook's display where a kernel runs this, else a bar on `out` (standard error)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if out is None and shell is not None and getattr(shell, "kernel", None) is not None:
        return _NotebookLine(importlib.import_module("IPython.display").display)
    return _TerminalBar(out or sys.stderr)
