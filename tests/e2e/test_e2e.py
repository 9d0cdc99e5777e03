"""End to end: `scripts/e2e.sh` builds the real images, installs `kubectl apply -k` of the local-images
overlay and runs the digits example to Succeeded, on kind, minikube or the local cluster's real node.

The script picks the cluster (`E2E_CLUSTER`, else kind, minikube, then the local cluster as root) and
exits 77 when this machine has none it can use: the test then skips with the script's reason. CI sets
`E2E_CLUSTER=local`, where anything missing fails instead. The images are built as cached (README's first
command built them in CI); that the images file holds only the images when the base is made anew, every
tool printing, is tests/unit/devtools/test_images_output.py's to prove.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from support.repository import ROOT

pytestmark = pytest.mark.e2e
SKIPPED = 77  # scripts/e2e.sh's exit status when what it needs is missing


def test_the_example_succeeds_on_a_real_cluster() -> None:
    env = {**os.environ, "E2E_ARTIFACTS": str(ROOT / "e2e-artifacts")}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "e2e.sh")], env=env, capture_output=True, text=True, timeout=3600, check=False
    )
    if result.returncode == SKIPPED:
        pytest.skip(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
    assert "e2e passed on" in result.stdout
