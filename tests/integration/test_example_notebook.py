"""The example notebook run as Jupyter runs it (nbclient, a real kernel) against the local cluster, its jobs on
the process node: every cell runs, the function trains on this machine and then on the cluster, and the
outputs say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from kube_cluster import Cluster
from operator_process import OperatorProcess
from repository import ROOT

NOTEBOOK = ROOT / "examples" / "train-a-function.ipynb"


def _text(cell: dict[str, Any]) -> str:
    """What a cell showed: its streams, its results and its displays (the last state of each)."""
    parts = []
    for output in cell.get("outputs") or []:
        parts.append(output.get("text") or output.get("data", {}).get("text/plain") or "")
    return "\n".join(parts)


def test_the_example_notebook_trains_on_this_machine_then_on_the_cluster(
    process_cluster: Cluster,
    operator: OperatorProcess,
    process_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_bytes(process_cluster.kubeconfig.read_bytes())
    process_cluster.kubectl(
        "config", "set-context", "--current", f"--namespace={process_namespace}", f"--kubeconfig={kubeconfig}"
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # the kernel's: `Client()` reads it as kubectl does
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    shown = [_text(cell) for cell in code]
    assert shown[2].endswith("\n0"), shown[2][-2000:]  # on this machine, the job's code last
    assert "Succeeded: step" in shown[3] and "test accuracy" in shown[3], shown[3][-2000:]  # on the cluster
    assert "Succeeded" in shown[5] and "last loss" in shown[5], shown[5][-2000:]  # ParameterServer
