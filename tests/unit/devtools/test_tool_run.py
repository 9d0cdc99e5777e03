"""Build tools run by the development commands print to stderr: their stdout is the commands' result."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from disttrain_dev.tool_run import run_tool


def test_a_tool_s_output_goes_to_stderr_between_the_command_and_its_time(capfd: pytest.CaptureFixture[str]) -> None:
    run_tool([sys.executable, "-c", "print('progress of a build')"])
    out, err = capfd.readouterr()
    assert out == ""
    shown, printed, took = err.splitlines()
    assert shown.startswith(f"+ {sys.executable} -c ")
    assert printed == "progress of a build"
    assert re.fullmatch(rf"\+ \d+s: {re.escape(sys.executable)} -c .*", took)


def test_a_failing_tool_raises_with_its_own_message_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(subprocess.CalledProcessError):
        run_tool([sys.executable, "-c", "import sys; sys.exit('the mirror did not answer')"])
    assert "the mirror did not answer" in capfd.readouterr().err


def test_go_s_line_per_module_downloaded_is_counted_not_shown(capfd: pytest.CaptureFixture[str]) -> None:
    script = "print('go: downloading k8s.io/api v0.36.3'); print('go: downloading k8s.io/utils v0.1'); print('built')"
    run_tool([sys.executable, "-c", script])
    _, printed, took = capfd.readouterr().err.splitlines()
    assert printed == "built"
    assert took.endswith("(2 Go modules downloaded)")
