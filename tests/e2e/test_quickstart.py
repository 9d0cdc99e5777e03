"""README's first command, `scripts/quickstart.sh`, then README's first job and the docs' tour after it, run as a
user runs them, on each node the quick start can choose.

The quick start installs the packages into the environment that runs the tests (already installed there,
so pip only checks), reuses the running local cluster, trains the digits example to Succeeded and lists
the exported model; README's first job and the tour (`readme.TOUR`) then run word for word with what it
printed. Needs root; the
real node also needs what `real_node.missing_requirement` names.

CI runs README's first command, first job and tour itself, first thing, in a new virtual environment, and
names what they printed in `DISTTRAIN_QUICKSTART_LOG`: the node it chose is then checked on that output
rather than trained a second time (one proof of each path)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from disttrain_dev import cluster as devcluster
from disttrain_dev import local_operator, readme, real_node
from support.kube_cluster import Cluster
from support.repository import ROOT

pytestmark = pytest.mark.e2e
PROVEN_LOG = "DISTTRAIN_QUICKSTART_LOG"  # what README's first command and first job printed, where CI ran them
FIRST_JOB_NAMESPACE = "first"  # README's
FIRST_JOB_STEPS = 5 * (1437 // 64)  # README's first job: the digits training split, 5 epochs at a batch of 64
CLIENT_EXAMPLE_STEPS = 8 * (1437 // 64)  # docs/client.md's: examples/local-multi-worker-digits.yaml, 8 epochs


@pytest.fixture
def left_behind() -> Iterator[None]:
    """The quickstart leaves its job and the operator for the user, and README's first job adds one: the test
    removes them, waiting until their pods are gone, and the admission policy an install on the real node
    made (it would refuse jobs to later tests' identities that may not create pods), then stops the operator
    it left on this machine."""
    yield
    if devcluster.running_state() is not None:
        cluster = Cluster(devcluster.kubeconfig_path())
        for name in ("quickstart", FIRST_JOB_NAMESPACE, "disttrain-system"):
            cluster.delete_namespace(name)
        cluster.kubectl("delete", "--ignore-not-found", "-f", str(ROOT / "deploy" / "admission" / "policy.yaml"))
    local_operator.stop(devcluster.state_dir())


@pytest.mark.parametrize("node", ["real", "process"])
def test_the_quickstart_trains_the_example_and_shows_the_model(node: str, left_behind: None) -> None:
    if os.geteuid() != 0:
        pytest.skip("the quickstart's nodes need root")
    missing = real_node.missing_requirement() if node == "real" else None
    if missing is not None:
        pytest.skip(missing)
    proven = Path(os.environ[PROVEN_LOG]).read_text() if PROVEN_LOG in os.environ else ""
    if f"quickstart on the {node} node" in proven:
        _check(proven, node)  # README's first command, as CI ran it
        return
    # the script installs into the environment `python3` runs in: this one, activated or not
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, "PATH": path, "DISTTRAIN_QUICKSTART_NODE": node}
    script = ["bash", str(ROOT / "scripts" / "quickstart.sh")]
    result = subprocess.run(script, env=env, capture_output=True, text=True, timeout=1800, check=False)
    printed = result.stdout + result.stderr
    assert result.returncode == 0, printed[-5000:]
    returncode, walked = readme.walk(printed, {"DISTTRAIN_DEV_NODE": node})  # CI's cluster runs both nodes
    _check(f"{printed}{walked}", node)
    assert returncode == 0, walked[-5000:]


def _check(output: str, node: str) -> None:
    """What README says the quick start prints, in what it printed (stdout and stderr)."""
    assert f"quickstart on the {node} node" in output
    assert "Succeeded" in output and '"event": "finished", "steps": 176' in output
    assert "saved_model.pb" in output
    # the lines README shows of it
    header = "NAME PHASE STRATEGY READY RESTARTS STEP ETA EPOCH LOSS EVAL-STEP EVAL-ACCURACY AGE"
    assert header in " ".join(output.split())
    assert "kubectl of the cluster's version: " in output
    # then README's first job, as written, on the same cluster
    assert readme.FIRST_JOB_HEADER in output, "README's first job did not run after the quick start"
    first_job = output.split(readme.FIRST_JOB_HEADER, 1)[1]
    assert f"pods run on the {node} node" in first_job
    assert "disttrainjob.disttrain.io/digits condition met" in first_job
    assert f'"event": "finished", "steps": {FIRST_JOB_STEPS}' in first_job
    # then each block of the tour, in order, each as written
    for page, marker in readme.TOUR:
        assert f"{readme.TOUR_HEADER}{page} {marker}" in output, f"the tour stopped before {page}'s {marker}"
    tour = dict(_tour_steps(output))
    assert not [marker for marker, printed in tour.items() if "Traceback" in printed]
    assert f'"event": "finished", "steps": {FIRST_JOB_STEPS}' in tour["tour-logs"]  # attempt 1's kept log
    assert tour["tour-logs-python"].startswith("1 0 ")  # worker-1's attempt 1, kept, exit code 0
    assert "digits" in tour["tour-jobs"] and "Succeeded" in tour["tour-jobs"]
    assert "served a page that holds 'TensorBoard'" in tour["tour-tensorboard"]
    assert tour["tour-tensorboard-python"].startswith("http://127.0.0.1:")
    assert "served a page that holds 'digits'" in tour["tour-dashboard"]
    assert f'"event": "finished", "steps": {CLIENT_EXAMPLE_STEPS}' in tour["tour-client"]


def _tour_steps(output: str) -> Iterator[tuple[str, str]]:
    """Each block of the tour's marker, with what it printed."""
    for step in output.split(readme.TOUR_HEADER)[1:]:
        heading, printed = step.split("\n", 1)
        yield heading.split()[-1], printed
