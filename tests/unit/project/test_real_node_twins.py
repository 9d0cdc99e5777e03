"""Each process-node scenario marked `real_node_twin` names a test of test_real_node.py: a twin renamed or
removed would leave the process node's scenario run where nothing proves it in containers, or skipped
where nothing does at all."""

from __future__ import annotations

import ast

from support.repository import ROOT

INTEGRATION = ROOT / "tests" / "integration"


def _tests(path: str) -> set[str]:
    tree = ast.parse((INTEGRATION / path).read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def _twins() -> dict[str, str]:
    """Each marked test's name, with the twin its marker names."""
    found = {}
    for path in INTEGRATION.glob("test_*.py"):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.real_node_twin":
                    found[node.name] = ast.literal_eval(decorator.args[0])
    return found


def test_every_twin_named_is_a_real_node_test() -> None:
    twins = _twins()
    assert len(twins) == 5, twins
    assert set(twins.values()) <= _tests("test_real_node.py"), set(twins.values()) - _tests("test_real_node.py")
