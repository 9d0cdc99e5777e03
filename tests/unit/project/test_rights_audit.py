"""The rights audit's judgement of a whole integration run, from the notes its processes hand over."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from support import rights_audit
from support.rbac_rights import Right, bound_rights
from support.repository import ROOT
from support.xdist_schedule import BESIDE_THE_CLUSTER

EVERY_MODULE = sorted(
    {path.relative_to(ROOT).as_posix() for path in rights_audit.INTEGRATION.glob("test_*.py")} - BESIDE_THE_CLUSTER
)


def _granted(account: str) -> set[Right]:
    return set().union(*(bound_rights(path, account) for path in rights_audit.HELD_ACCOUNTS[account]))


def _worker_notes(modules: list[str], used: dict[str, set[Right]]) -> dict[str, object]:
    notes = rights_audit.Notes(ran=set(modules), used=used)
    return notes.as_output()


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> rights_audit.Notes:
    fresh = rights_audit.Notes()
    monkeypatch.setattr(rights_audit, "NOTES", fresh)
    return fresh


def test_two_workers_notes_together_make_a_whole_run_whose_every_right_was_used(notes: rights_audit.Notes) -> None:
    half = len(EVERY_MODULE) // 2
    operator, dashboard = _granted("disttrain-operator"), _granted("disttrain-dashboard")
    some = set(sorted(operator)[:3])
    first = {"disttrain-operator": some, "disttrain-dashboard": dashboard}
    rights_audit.note_worker({rights_audit.WORKER_OUTPUT: _worker_notes(EVERY_MODULE[:half], first)})
    second = {"disttrain-operator": operator - some}
    rights_audit.note_worker({rights_audit.WORKER_OUTPUT: _worker_notes(EVERY_MODULE[half:], second)})
    verdict, unused = rights_audit._judge(SimpleNamespace(testsfailed=0))  # type: ignore[arg-type]
    assert unused == {} and verdict.startswith("each of the"), verdict


def test_a_right_no_plane_saw_used_fails_the_run(notes: rights_audit.Notes) -> None:
    operator = _granted("disttrain-operator") - set(rights_audit.UNEXERCISED)
    left_out = sorted(operator)[0]
    used = {"disttrain-operator": operator - {left_out}, "disttrain-dashboard": _granted("disttrain-dashboard")}
    rights_audit.note_worker({rights_audit.WORKER_OUTPUT: _worker_notes(EVERY_MODULE, used)})
    verdict, unused = rights_audit._judge(SimpleNamespace(testsfailed=0))  # type: ignore[arg-type]
    assert unused == {"disttrain-operator": {left_out}}, verdict


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"ran": set(EVERY_MODULE[1:])}, "1 modules not run"),
        ({"skipped": {"tests/integration/test_lifecycle.py::test_a"}}, "1 tests skipped"),
        ({"deselected": {"tests/integration/test_lifecycle.py::test_a"}}, "1 tests deselected"),
    ],
)
def test_a_run_that_is_not_whole_is_not_judged_and_says_why(
    notes: rights_audit.Notes, change: dict[str, set[str]], reason: str
) -> None:
    notes.ran = set(EVERY_MODULE)
    for name, value in change.items():
        setattr(notes, name, value)
    verdict, unused = rights_audit._judge(SimpleNamespace(testsfailed=0))  # type: ignore[arg-type]
    assert unused == {} and verdict == f"not judged, as {reason}"


def test_a_run_with_a_failure_is_not_judged(notes: rights_audit.Notes) -> None:
    notes.ran = set(EVERY_MODULE)
    verdict, unused = rights_audit._judge(SimpleNamespace(testsfailed=2))  # type: ignore[arg-type]
    assert unused == {} and verdict == "not judged, as 2 failed"
