"""What `Client.wait(..., progress=True)` shows of a job, in a terminal and in a notebook."""

from __future__ import annotations

import io
import sys
import types
from typing import Any

import pytest

from disttrain.progress_view import progress_html, progress_line, progress_view
from disttrain_core.api.job import DistTrainJob
from support.job_builder import JobBuilder


def _job(phase: str | None, progress: dict[str, Any] | None = None) -> DistTrainJob:
    fields = {key: value for key, value in (("phase", phase), ("progress", progress)) if value is not None}
    return JobBuilder("digits", "team").counts({"Worker": 2}).status(**fields).model()


def test_the_line_says_what_the_status_knows() -> None:
    assert progress_line(_job(None)) == "digits Pending"
    assert progress_line(_job("Running", {"step": 12})) == "digits Running: step 12"
    reported = {"step": 120, "totalSteps": 990, "loss": 0.23104, "estimatedRemainingSeconds": 41}
    assert progress_line(_job("Running", reported)) == "digits Running: step 120/990 (12%), loss 0.2310, 0:00:41 left"


def test_a_notebook_s_bar_is_html_s_own_progress_element() -> None:
    assert progress_html(_job("Running", {"step": 120, "totalSteps": 990})) == (
        '<div><progress value="120" max="990"></progress> <code>digits Running: step 120/990 (12%)</code></div>'
    )
    assert progress_html(_job(None)).startswith("<div><progress></progress> <code>digits Pending")


def test_a_terminal_gets_a_bar_with_the_line() -> None:
    out = io.StringIO()
    view = progress_view(out)
    view.show(_job("Running", {"step": 495, "totalSteps": 990}))
    view.show(_job("Succeeded", {"step": 990, "totalSteps": 990}))
    view.close()
    assert "digits Succeeded: step 990/990 (100%)" in out.getvalue()


def test_a_notebook_gets_one_display_updated_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[tuple[str, str]] = []

    class Handle:
        def update(self, data: dict[str, str], raw: bool) -> None:
            shown.append(("update", data["text/plain"]))

    def display(data: dict[str, str], raw: bool, display_id: bool) -> Handle:
        shown.append(("display", data["text/plain"]))
        return Handle()

    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    monkeypatch.setitem(sys.modules, "IPython.display", types.SimpleNamespace(display=display))
    view = progress_view()
    view.show(_job("Running", {"step": 1}))
    view.show(_job("Running", {"step": 2}))
    view.close()
    assert shown == [("display", "digits Running: step 1"), ("update", "digits Running: step 2")]
