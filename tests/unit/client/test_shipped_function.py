"""What `Client.train` ships of a function, and each function it refuses before anything is created."""

from __future__ import annotations

import functools
import importlib.util
import linecache
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from disttrain.shipped_function import MAX_SOURCE_BYTES, FunctionNotShippableError, ShippedFunction, ship


def train(strategy: Any, epochs: int, *, batch: int = 64, **more: Any) -> None:
    import json  # noqa: PLC0415 - a shipped function imports what it uses

    print(json.dumps({"epochs": epochs, "batch": batch, **more}), strategy)


def _run(shipped: ShippedFunction, **arguments: Any) -> Any:
    """Call the shipped source as a replica would: alone in a namespace of its own."""
    namespace: dict[str, Any] = {}
    exec(compile(shipped.source, f"<{shipped.name}>", "exec"), namespace)
    return namespace[shipped.name](**arguments)


def test_a_module_function_ships_whole_with_its_signature(capsys: pytest.CaptureFixture[str]) -> None:
    shipped = ship(train)
    assert shipped.source.startswith("def train(strategy: Any, epochs: int")
    assert (shipped.parameters, shipped.required, shipped.takes_any) == (
        ("strategy", "epochs", "batch"),
        ("strategy", "epochs"),
        True,
    )
    assert shipped.takes_strategy
    _run(shipped, strategy="s", epochs=2, extra=1)
    assert capsys.readouterr().out == '{"epochs": 2, "batch": 64, "extra": 1} s\n'


def test_a_nested_function_without_free_variables_ships_dedented() -> None:
    def inner(rate: float = 0.1) -> float:
        return rate * 2

    shipped = ship(inner)
    assert shipped.source.startswith("def inner(") and not shipped.takes_strategy
    assert _run(shipped, rate=0.5) == 1.0


def _closure() -> Callable[[], int]:
    hidden = 3

    def uses_hidden() -> int:
        return hidden

    return uses_hidden


def _decorated() -> Callable[..., Any]:
    @functools.lru_cache
    def cached() -> int:
        return 1

    return cached.__wrapped__


class _Trainer:
    def fit(self) -> None: ...


@pytest.mark.parametrize(
    ("function", "words"),
    [
        (lambda: None, "a lambda cannot be shipped: define the function with def"),
        (_closure(), "uses_hidden() uses hidden from the function around it"),
        (_decorated(), "cached() is decorated; the decorator does not travel with its source"),
        (_Trainer().fit, "only a function defined with def can be shipped, not a method"),
        (functools.partial(train, epochs=1), "not a partial"),
        (print, "not a builtin_function_or_method"),
    ],
    ids=["lambda", "closure", "decorated", "method", "partial", "builtin"],
)
def test_what_cannot_travel_as_source_is_refused_with_what_to_change(function: Any, words: str) -> None:
    with pytest.raises(FunctionNotShippableError, match=None) as refused:
        ship(function)
    assert words in str(refused.value)


def test_a_source_over_the_bound_is_refused(tmp_path: Path) -> None:
    module = tmp_path / "big_training.py"
    padding = "x" * (MAX_SOURCE_BYTES + 1)
    module.write_text(f'def big() -> None:\n    """{padding}"""\n')
    spec = importlib.util.spec_from_file_location("big_training", module)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    with pytest.raises(FunctionNotShippableError, match=rf"over the {MAX_SOURCE_BYTES} that ship with a job"):
        ship(loaded.big)


@pytest.fixture
def notebook(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """An IPython whose `In` holds the cells run so far, as a notebook's kernel keeps them."""
    cells: list[str] = [""]
    shell = types.SimpleNamespace(user_ns={"In": cells})
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    yield cells


def _run_cell(cells: list[str], cell: str) -> dict[str, Any]:
    """Run a cell as a kernel without a source cache does: its functions' source is out of inspect's reach."""
    cells.append(cell)
    namespace: dict[str, Any] = {}
    exec(compile(cell, "<cell>", "exec"), namespace)
    return namespace


def test_a_notebook_cell_s_function_ships_from_the_newest_cell_that_defines_it(notebook: list[str]) -> None:
    _run_cell(notebook, "def fit(epochs):\n    return epochs\n")
    notebook.append("!pip list\n")  # a cell that is not Python is passed over
    defined = _run_cell(notebook, "import math\n\ndef fit(epochs, scale=2):\n    return epochs * scale\n\nfit(1)\n")
    shipped = ship(defined["fit"])
    assert shipped.source == "def fit(epochs, scale=2):\n    return epochs * scale\n"
    assert _run(shipped, epochs=3) == 6


def test_a_real_ipython_cell_s_function_ships_with_its_line_cache_and_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """IPython itself, running cells as a notebook's kernel does (keeping their history in `In`)."""
    monkeypatch.delitem(sys.modules, "IPython", raising=False)  # the real one, imported afresh
    from IPython.core.interactiveshell import InteractiveShell  # noqa: PLC0415 - a test dependency only

    cell = "def cell_fit(strategy, epochs=1):\n    return epochs * 2\n"
    shell = InteractiveShell.instance()
    try:
        shell.run_cell(cell, store_history=True)
        function = shell.user_ns["cell_fit"]
        assert ship(function).source == cell
        linecache.cache.pop(function.__code__.co_filename)  # out of inspect's reach: the cell is read from `In`
        shipped = ship(function)
    finally:
        InteractiveShell.clear_instance()
    assert (shipped.source, shipped.takes_strategy) == (
        "def cell_fit(strategy, epochs=1):\n    return epochs * 2\n",
        True,
    )


def test_a_function_whose_source_is_nowhere_is_refused(notebook: list[str]) -> None:
    defined = _run_cell([], "def lost():\n    return 1\n")  # not in the notebook's cells
    with pytest.raises(FunctionNotShippableError, match=r"the source of lost\(\) cannot be found"):
        ship(defined["lost"])


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ({"epochs": 1, "strategy": 2}, "parameters may not set 'strategy'"),
        ({"epochs": 1, "progress": 2}, "parameters may not set 'progress'"),
        ({"batch": 8}, "train() needs 'epochs': give them in parameters="),
    ],
)
def test_parameters_the_function_cannot_take_are_refused(given: dict[str, Any], words: str) -> None:
    with pytest.raises(FunctionNotShippableError) as refused:
        ship(train).refuse_arguments(given)
    assert words in str(refused.value)


def test_unknown_parameters_are_refused_where_the_function_takes_no_more() -> None:
    def fit(epochs: int) -> int:
        return epochs

    ship(fit).refuse_arguments({"epochs": 1})
    ship(train).refuse_arguments({"epochs": 1, "anything": 2})  # **more takes it
    with pytest.raises(FunctionNotShippableError, match=r"fit\(\) takes no parameter 'rate'; it takes epochs"):
        ship(fit).refuse_arguments({"epochs": 1, "rate": 2})


def test_a_function_written_for_kubeflows_v1_sdk_takes_the_parameters_as_one_dict() -> None:
    """Kubeflow's SDK calls `train_func(parameters)`: the same function runs under Client.train unchanged."""

    def train_func(parameters: dict[str, Any]) -> None:
        print(parameters["epochs"])

    shipped = ship(train_func)
    assert shipped.takes_one_dict
    assert shipped.arguments({"epochs": 3, "lr": 0.1}) == {"parameters": {"epochs": 3, "lr": 0.1}}
    assert shipped.arguments({"parameters": {"epochs": 3}}) == {"parameters": {"epochs": 3}}  # named, as before
    with pytest.raises(FunctionNotShippableError, match="parameters may not set 'strategy'"):
        shipped.arguments({"strategy": 1})


def test_a_refusal_says_how_to_call_the_function() -> None:
    def fit(strategy: Any, epochs: int, rate: float = 0.1) -> None:
        print(strategy, epochs, rate)

    with pytest.raises(FunctionNotShippableError) as refused:
        ship(fit).arguments({"batch": 8, "epochs": 1})
    assert str(refused.value) == (
        "fit() takes no parameter 'batch'; it takes strategy, epochs, rate: "
        "call Client.train(fit, parameters={'epochs': ..., 'rate': ...})"
    )
