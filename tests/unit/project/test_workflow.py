"""The GitHub Actions workflow is valid (actionlint) and runs what CI here runs, plus kind's end to end."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from disttrain_dev.go_tools import ACTIONLINT
from support.repository import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


@pytest.mark.gotool
def test_actionlint_finds_nothing_wrong() -> None:
    unavailable = ACTIONLINT.unavailable()
    if unavailable is not None:
        pytest.skip(unavailable)
    result = subprocess.run(
        [str(ACTIONLINT.ensure()), "-no-color", str(WORKFLOW)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_workflow_lints_runs_ci_and_the_kind_end_to_end() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    steps = {name: " ".join(str(step.get("run", "")) for step in job["steps"]) for name, job in jobs.items()}
    assert all(check in steps["lint"] for check in ("ruff check", "lint-imports", "disttrain crd check", "mypy"))
    assert "bash .ci/run" in steps["test"]
    assert "go install sigs.k8s.io/kind@" in steps["e2e-kind"] and "pytest -m e2e" in steps["e2e-kind"]
    assert "go install sigs.k8s.io/kind@v0.30.0" in (ROOT / "docs" / "testing.md").read_text()  # the version named
    assert "go install sigs.k8s.io/kind@v0.30.0" in steps["e2e-kind"]
