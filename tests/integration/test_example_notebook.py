"""The example notebook against the local cluster, its jobs on the process node (`example_notebook`); the
real node's run is in test_real_node.py, in the trainer image the install names."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.example_notebook import run_example_notebook
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess


def test_the_example_notebook_trains_on_this_machine_then_on_the_cluster(
    process_cluster: Cluster,
    operator: OperatorProcess,
    process_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_example_notebook(process_cluster, process_namespace, tmp_path, monkeypatch)
