"""End to end on kind or minikube: real images, `kubectl apply -k deploy/`, the digits example to Succeeded.

Skipped, with the reason, where Docker, or both kind and minikube, are missing; `scripts/e2e.sh` does
the work and can run alone in a CI that has them.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from support import ROOT

pytestmark = pytest.mark.e2e
SKIPPED = 77  # scripts/e2e.sh's exit status when what it needs is missing


def _missing() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "the Docker daemon does not answer"
    if shutil.which("kind") is None and shutil.which("minikube") is None:
        return "neither kind nor minikube is installed"
    if shutil.which("kubectl") is None:
        return "kubectl is not installed"
    return None


def test_the_example_succeeds_on_a_real_cluster() -> None:
    reason = _missing()
    if reason is not None:
        pytest.skip(f"e2e needs Docker with kind or minikube: {reason}")
    env = {**os.environ, "E2E_ARTIFACTS": str(ROOT / "e2e-artifacts")}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "e2e.sh")], env=env, capture_output=True, text=True, timeout=3600, check=False
    )
    if result.returncode == SKIPPED:
        pytest.skip(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
