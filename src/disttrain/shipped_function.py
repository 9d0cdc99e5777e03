"""A training function as `Client.train` and `disttrain.local.train` ship it: its source, whole and dedented,
run in every replica by a runner that knows nothing of where it came from.

A function can travel only as source: its code object does not survive another Python, and a pickle would
need the user's module on the other side. So what the source alone cannot carry is refused here, before
anything is created: a lambda (no `def` to name), a closure (its free variables stay behind), a decorated
function (the decorator is a name the other side lacks), a method or any other callable, and a source over
`MAX_SOURCE_BYTES` (it travels in a ConfigMap, whose whole data the API server bounds).
Names the function uses from its module must be imported inside it, as in Kubeflow's SDK.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAX_SOURCE_BYTES = 256 * 1024
STRATEGY_PARAMETER = "strategy"  # a parameter of this name gets the ready `tf.distribute` strategy
PROGRESS_PARAMETER = "progress"  # and one of this name a Keras callback that reports the job's progress
GIVEN = (STRATEGY_PARAMETER, PROGRESS_PARAMETER)  # what each replica passes, never `parameters=`
KUBEFLOW_PARAMETERS = "parameters"  # Kubeflow's v1 SDK calls a function with one dict of this name


class FunctionNotShippableError(ValueError):
    """The function cannot be run elsewhere from its source: the message says why and what to change."""


@dataclass(frozen=True)
class ShippedFunction:
    """What a replica needs to call the function: its name, its source, and which parameters it takes."""

    name: str
    source: str
    parameters: tuple[str, ...]  # its named parameters, in order
    required: tuple[str, ...]  # those without a default
    takes_any: bool  # it has **kwargs: every key of `parameters=` is passed

    @property
    def takes_strategy(self) -> bool:
        return STRATEGY_PARAMETER in self.parameters

    @property
    def takes_progress(self) -> bool:
        return PROGRESS_PARAMETER in self.parameters

    @property
    def takes_one_dict(self) -> bool:
        """Written for Kubeflow's v1 SDK: its one parameter besides `strategy` and `progress` is `parameters`, the
        whole dict."""
        return [name for name in self.parameters if name not in GIVEN] == [KUBEFLOW_PARAMETERS] and not self.takes_any

    def arguments(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of its call from `parameters=`: those keys, or the whole dict as `parameters` for a
        function written for Kubeflow's v1 SDK. Refuses keys it does not take, and parameters it needs that are
        not given, saying how to call it."""
        if self.takes_one_dict and set(given) != {KUBEFLOW_PARAMETERS}:
            self.refuse_arguments({KUBEFLOW_PARAMETERS: None, **{name: None for name in given if name in GIVEN}})
            return {KUBEFLOW_PARAMETERS: dict(given)}
        self.refuse_arguments(given)
        return dict(given)

    def refuse_arguments(self, given: Iterable[str]) -> None:
        """Refuse `parameters=` keys the function does not take, and parameters it needs that are not given."""
        keys = set(given)
        for name in GIVEN:
            if name in keys:
                raise FunctionNotShippableError(f"parameters may not set {name!r}: each replica passes its own there")
        unknown = sorted(keys - set(self.parameters)) if not self.takes_any else []
        if unknown:
            raise FunctionNotShippableError(
                f"{self.name}() takes no parameter {', '.join(map(repr, unknown))};"
                f" it takes {', '.join(self.parameters) or 'none'}: {self._call_shown()}"
            )
        missing = [name for name in self.required if name not in keys and name not in GIVEN]
        if missing:
            raise FunctionNotShippableError(
                f"{self.name}() needs {', '.join(map(repr, missing))}: give them in parameters=, {self._call_shown()}"
            )

    def _call_shown(self) -> str:
        """How to call it: `parameters=` names its keyword arguments (or is the one dict a v1 SDK function takes)."""
        named = [name for name in self.parameters if name not in GIVEN]
        shown = ", ".join(f"{name!r}: ..." for name in named)
        return f"call Client.train({self.name}, parameters={{{shown}}})"


def ship(function: Callable[..., Any]) -> ShippedFunction:
    """The function as source, or FunctionNotShippableError saying why it cannot travel."""
    if not isinstance(function, types.FunctionType):
        kind = type(function).__name__
        raise FunctionNotShippableError(f"only a function defined with def can be shipped, not a {kind}")
    name = function.__name__
    if name == "<lambda>":
        raise FunctionNotShippableError("a lambda cannot be shipped: define the function with def")
    if function.__code__.co_freevars:
        used = ", ".join(function.__code__.co_freevars)
        raise FunctionNotShippableError(
            f"{name}() uses {used} from the function around it, which does not travel with its source:"
            " define it at the top level and pass values in parameters="
        )
    if inspect.iscoroutinefunction(function) or inspect.isgeneratorfunction(function):
        raise FunctionNotShippableError(f"{name}() must be a plain function, not a coroutine or generator")
    source = _source(function)
    size = len(source.encode())
    if size > MAX_SOURCE_BYTES:
        raise FunctionNotShippableError(
            f"{name}()'s source is {size} bytes, over the {MAX_SOURCE_BYTES} that ship with a job:"
            " put the rest in a package and list it in packages="
        )
    definition = _definition(source, name)
    if definition.decorator_list:
        raise FunctionNotShippableError(
            f"{name}() is decorated; the decorator does not travel with its source: ship the undecorated function"
        )
    return _signature(name, source, definition)


def _source(function: types.FunctionType) -> str:
    """The function's source, dedented: from its file, else from the notebook cell that defined it."""
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        found = _cell_source(function.__name__, _notebook_cells())
    if found is None:
        raise FunctionNotShippableError(
            f"the source of {function.__name__}() cannot be found (defined in an interactive session"
            " that keeps no source): define it in a module or a notebook cell"
        )
    return found


def _notebook_cells() -> list[str]:
    """The cells run so far, where IPython runs this (its `In` list); else none."""
    ipython_module = sys.modules.get("IPython")
    get_ipython = getattr(ipython_module, "get_ipython", None)
    shell = get_ipython() if callable(get_ipython) else None
    cells = getattr(shell, "user_ns", {}).get("In", [])
    return [cell for cell in cells if isinstance(cell, str)]


def _cell_source(name: str, cells: list[str]) -> str | None:
    """The newest cell's definition of `name` at its top level, as its own source."""
    for cell in reversed(cells):
        try:
            tree = ast.parse(textwrap.dedent(cell))
        except SyntaxError:  # IPython's magics and shell escapes
            continue
        for node in reversed(tree.body):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                start = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                lines = textwrap.dedent(cell).splitlines()[start - 1 : node.end_lineno]
                return "\n".join(lines) + "\n"
    return None


def _definition(source: str, name: str) -> ast.FunctionDef:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise FunctionNotShippableError(f"the source of {name}() does not parse on its own: {error}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise FunctionNotShippableError(f"the source found for {name}() does not define it")


def _signature(name: str, source: str, definition: ast.FunctionDef) -> ShippedFunction:
    arguments = definition.args
    if arguments.vararg is not None or arguments.posonlyargs:
        raise FunctionNotShippableError(
            f"{name}() takes positional-only or *args parameters; each replica calls it with keywords only"
        )
    named = [*arguments.args, *arguments.kwonlyargs]
    positional_defaults = dict(zip(reversed(arguments.args), reversed(arguments.defaults), strict=False))
    keyword_defaults: Mapping[ast.arg, ast.expr | None] = dict(
        zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    )
    required = [
        argument.arg
        for argument in named
        if argument not in positional_defaults and keyword_defaults.get(argument) is None
    ]
    return ShippedFunction(
        name=name,
        source=source,
        parameters=tuple(argument.arg for argument in named),
        required=tuple(required),
        takes_any=arguments.kwarg is not None,
    )
