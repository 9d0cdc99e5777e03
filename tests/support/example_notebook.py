"""The example notebook run as Jupyter runs it (nbclient, a real kernel) against a cluster, in one namespace:
every cell runs, the function trains on this machine and then on the cluster, and the outputs say so. The
process node's run and the real node's share it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from support.kube_cluster import Cluster
from support.repository import ROOT

NOTEBOOK = ROOT / "examples" / "train-a-function.ipynb"


def _text(cell: dict[str, Any]) -> str:
    """What a cell showed: its streams, its results and its displays (the last state of each)."""
    parts = []
    for output in cell.get("outputs") or []:
        parts.append(output.get("text") or output.get("data", {}).get("text/plain") or "")
    return "\n".join(parts)


def run_example_notebook(cluster: Cluster, namespace: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cell, as written, with the kernel's kubeconfig naming `namespace`; its outputs checked."""
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_bytes(cluster.kubeconfig.read_bytes())
    cluster.kubectl("config", "set-context", "--current", f"--namespace={namespace}", f"--kubeconfig={kubeconfig}")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))  # the kernel's: `Client()` reads it as kubectl does
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(folder)}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    shown = [_text(cell) for cell in code]
    assert shown[2].endswith("\n0"), shown[2][-2000:]  # on this machine, the job's code last
    assert "Succeeded: step" in shown[3] and "test accuracy" in shown[3], shown[3][-2000:]  # on the cluster
    assert "Succeeded" in shown[5] and "last loss" in shown[5], shown[5][-2000:]  # ParameterServer
