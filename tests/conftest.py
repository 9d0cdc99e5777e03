"""Options and fixtures of the test suite."""

from __future__ import annotations

from typing import Any

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from disttrain_dev import real_node
from support import rights_audit
from support.xdist_schedule import ClusterSuitesOnOneWorker

REAL_NODE_SUITE = "test_real_node.py"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadScopeScheduling:
    return ClusterSuitesOnOneWorker(config, log)


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files instead of comparing")


@pytest.hookimpl(trylast=True)  # after `-m` and `--deselect` chose the run's tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A process-node scenario marked `real_node_twin` is skipped where its twin in test_real_node.py runs in
    the same session: the twin proves the scenario with the trainer image in containers, and the process
    node runs it only where the real node cannot (no root, no Docker engine)."""
    twins = {item.name for item in items if item.path.name == REAL_NODE_SUITE}
    if not twins or real_node.missing_requirement() is not None:
        return
    for item in items:
        marker = item.get_closest_marker(rights_audit.TWIN_MARK)
        if marker is not None and marker.args[0] in twins:
            reason = f"the real node runs this scenario with the trainer image: {REAL_NODE_SUITE}::{marker.args[0]}"
            item.add_marker(pytest.mark.skip(reason=reason))


# The rights audit of the integration run (`rights_audit`): each process notes what it ran, xdist's controller
# gathers the workers' notes and judges the whole run at its end.
def pytest_deselected(items: list[pytest.Item]) -> None:
    rights_audit.note_deselected(items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    rights_audit.note_ran(item)


def pytest_sessionstart(session: pytest.Session) -> None:
    rights_audit.start(session)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    rights_audit.note_report(report)


@pytest.hookimpl(optionalhook=True)  # xdist's hook
def pytest_testnodedown(node: Any, error: object) -> None:
    rights_audit.note_worker(getattr(node, "workeroutput", None))


@pytest.hookimpl(trylast=True)  # after the session's fixtures are gone: the second plane read before it went
def pytest_sessionfinish(session: pytest.Session) -> None:
    rights_audit.finish(session)
