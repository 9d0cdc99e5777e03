"""The example notebooks are committed as a user opens them fresh: valid, with every output stripped (CI runs
them against the local cluster, `tests/integration/test_example_notebook.py`)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from support.repository import ROOT

NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_a_notebook_is_valid_and_its_outputs_are_stripped(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code, "a notebook with no code"
    assert [(cell.outputs, cell.execution_count) for cell in code] == [([], None)] * len(code)


def test_there_is_an_example_notebook() -> None:
    assert [path.name for path in NOTEBOOKS] == ["train-a-function.ipynb"]
