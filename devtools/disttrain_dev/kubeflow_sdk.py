"""Kubeflow's own Python SDK for TFJobs (`kubeflow-training` from PyPI), in a virtual environment of
its own: it pins `kubernetes<36`, older than the operator's client, and users run it unchanged.
Created once and cached, keyed by the version."""

from __future__ import annotations

import venv
from pathlib import Path

from disttrain_dev.tool_run import run_tool
from disttrain_dev.versions import cache_root

VERSION = "1.9.4"


def sdk_python() -> Path:
    """The Python of a virtual environment holding kubeflow-training==VERSION, made on first use."""
    folder = cache_root() / f"kubeflow-training-{VERSION}"
    python = folder / "bin" / "python"
    if (folder / "installed").is_file():
        return python
    venv.create(folder, with_pip=True, clear=True)
    run_tool([str(python), "-m", "pip", "install", "--quiet", f"kubeflow-training=={VERSION}"])
    (folder / "installed").write_text(VERSION + "\n")
    return python
