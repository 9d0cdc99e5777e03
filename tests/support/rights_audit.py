"""The rights audit of a whole integration run: every right the operator's and the dashboard's rules grant was
used by them, as the API servers' audit logs show (a right no request used is one to drop; one they lack is
refused, which the operator fixtures find).

The integration modules run on two control planes (the local cluster and the suite's second plane) and may run
in two pytest-xdist workers: each process reads the audit log of every plane it ran tests on, before that plane
goes, and notes what it ran; xdist's controller gathers both workers' notes and judges once every worker is
done (`-n 0`: the one process judges)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from disttrain_dev import cluster as devcluster
from support.kube_cluster import OPERATOR_TEST_NAMESPACE
from support.rbac_rights import AUDIT_TIME, Right, bound_rights, used_rights
from support.repository import ROOT
from support.xdist_schedule import BESIDE_THE_CLUSTER

INTEGRATION = ROOT / "tests" / "integration"
TWIN_MARK = "real_node_twin"  # a process-node scenario skipped where its real-node twin runs
WORKER_OUTPUT = "rights_audit"  # the key of a worker's notes in xdist's `workeroutput`

# The test ServiceAccounts and the RBAC files their tests bind to them.
HELD_ACCOUNTS = {
    "disttrain-operator": (ROOT / "deploy" / "rbac.yaml", ROOT / "overlays" / "serve-tfjobs" / "rbac.yaml"),
    "disttrain-dashboard": (ROOT / "deploy" / "components" / "dashboard" / "rbac.yaml",),
}

# The operator's rights that the code uses on paths this suite cannot take, and where each is proven instead.
UNEXERCISED: dict[Right, str] = {
    (
        "",
        "pods",
        "get",
    ): "the kept-log keeper reads a pod only to retry a release refused as stale: test_kept_log_keeper.py",
    ("scheduling.volcano.sh", "podgroups", "create"): "Volcano is not run here: the gang builders' golden files",
    ("scheduling.x-k8s.io", "podgroups", "create"): "the coscheduling plugin is not run here: the same golden files",
    ("scheduling.k8s.io", "priorityclasses", "get"): "a queued job whose pods name a PriorityClass: test_kueue.py",
    ("kubeflow.org", "tfjobs", "delete"): "a served TFJob's ttlSecondsAfterFinished, as test_lifecycle.py's job's",
    ("kubeflow.org", "tfjobs", "get"): "a served TFJob over 64 KiB read whole, as test_hostile_tenants.py's jobs are:"
    " test_watched.py's path of either kind",
}


@dataclass
class Notes:
    """What one process (or, merged, the whole run) ran of the integration modules, and the rights the held
    accounts used on the planes it ran them on."""

    ran: set[str] = field(default_factory=set)  # modules, relative to the repository
    deselected: set[str] = field(default_factory=set)  # tests `-m` or `--deselect` left out
    skipped: set[str] = field(default_factory=set)  # tests skipped, but the real-node twins
    used: dict[str, set[Right]] = field(default_factory=dict)  # account: rights
    planes: dict[Path, str] = field(default_factory=dict)  # a plane's folder: since when its log is read
    judging_only: bool = False  # xdist's controller

    def merge(self, other: dict[str, Any]) -> None:
        self.ran.update(other["ran"])
        self.deselected.update(other["deselected"])
        self.skipped.update(other["skipped"])
        for account, rights in other["used"].items():
            self.used.setdefault(account, set()).update(tuple(right) for right in rights)

    def as_output(self) -> dict[str, Any]:
        """For xdist's `workeroutput`, which carries plain data only."""
        return {
            "ran": sorted(self.ran),
            "deselected": sorted(self.deselected),
            "skipped": sorted(self.skipped),
            "used": {account: sorted(rights) for account, rights in self.used.items()},
        }


NOTES = Notes()  # this process's


def _account_user(account: str) -> str:
    return f"system:serviceaccount:{OPERATOR_TEST_NAMESPACE}:{account}"


def plane_in_use(folder: Path) -> None:
    """A control plane (its state folder) that this process's tests start to use: its audit log counts from now."""
    NOTES.planes.setdefault(folder, datetime.now(UTC).strftime(AUDIT_TIME))


def read_plane(folder: Path) -> None:
    """The rights the held accounts used on the plane, read from its audit log: before the plane goes."""
    since = NOTES.planes.pop(folder, None)
    if since is None:
        return
    for account in HELD_ACCOUNTS:
        used = used_rights(devcluster.audit_logs(folder), _account_user(account), since)
        NOTES.used.setdefault(account, set()).update(used)


def note_deselected(items: list[pytest.Item]) -> None:
    NOTES.deselected.update(item.nodeid for item in items if INTEGRATION in item.path.parents)


def note_ran(item: pytest.Item) -> None:
    if INTEGRATION in item.path.parents:
        NOTES.ran.add(item.path.relative_to(ROOT).as_posix())


def start(session: pytest.Session) -> None:
    """xdist's controller, whose tests its workers run, only gathers and judges."""
    NOTES.judging_only = session.config.pluginmanager.has_plugin("dsession")


def note_report(report: pytest.TestReport) -> None:
    """Where the test ran (xdist's controller sees the workers' reports again, without their marks)."""
    if NOTES.judging_only:
        return
    if report.skipped and report.nodeid.startswith("tests/integration/") and TWIN_MARK not in report.keywords:
        NOTES.skipped.add(report.nodeid)


def note_worker(output: dict[str, Any] | None) -> None:
    """A worker's notes, in xdist's controller once the worker is done."""
    if output and WORKER_OUTPUT in output:
        NOTES.merge(output[WORKER_OUTPUT])


def finish(session: pytest.Session) -> None:
    """At a process's end: a worker hands its notes to the controller; the controller, or a run without xdist,
    judges the whole run."""
    for folder in list(NOTES.planes):  # the planes still up (the local cluster stays)
        read_plane(folder)
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[WORKER_OUTPUT] = NOTES.as_output()
        return
    if not NOTES.ran - BESIDE_THE_CLUSTER:
        return  # no module on a suite's plane ran: nothing to say
    verdict, unused = _judge(session)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")  # ends the line of progress dots: the verdict goes on its own
        reporter.write_sep("=", f"rights audit: {verdict}", red=bool(unused))
    if unused:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _judge(session: pytest.Session) -> tuple[str, dict[str, set[Right]]]:
    """After a whole integration run that passed (every module on a suite's plane run, none of its tests
    deselected, skipped but the process-node scenarios whose real-node twins ran, or failed): the rights
    granted that no request used, and what to say of them. Where the run was not whole the audit cannot tell,
    and says why."""
    every = {path.relative_to(ROOT).as_posix() for path in INTEGRATION.glob("test_*.py")} - BESIDE_THE_CLUSTER
    missing = every - NOTES.ran
    reasons = [
        f"{len(missing)} modules not run" if missing else "",
        f"{len(NOTES.deselected)} tests deselected" if NOTES.deselected else "",
        f"{len(NOTES.skipped)} tests skipped" if NOTES.skipped else "",
        f"{session.testsfailed} failed" if session.testsfailed else "",
    ]
    if any(reasons):
        return "not judged, as " + ", ".join(reason for reason in reasons if reason), {}
    unused: dict[str, set[Right]] = {}
    granted_in_all = 0
    for account, files in HELD_ACCOUNTS.items():
        granted = set().union(*(bound_rights(path, account) for path in files))
        assert set(UNEXERCISED) <= granted or account != "disttrain-operator", "UNEXERCISED names a right not held"
        granted_in_all += len(granted)
        left = granted - NOTES.used.get(account, set()) - set(UNEXERCISED)
        if left:
            unused[account] = left
    if unused:
        return f"rights granted that no request of the suite used: {unused}", unused
    return f"each of the {granted_in_all} rights the held accounts' rules grant was used, or is proven elsewhere", {}
