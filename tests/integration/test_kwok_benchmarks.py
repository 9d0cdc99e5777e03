"""The benchmarks of kwok's nodes, each with the peer (training-operator, built from its module) beside the
operator, on a control plane of their own beside the local cluster: another worker runs them while the local
cluster's suites run. Nothing here asserts a time: the figures come from full runs (docs/benchmarks.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.bench_support import FIGURE, QUIET, bench, bench_output
from support.multikueue_support import control_plane
from support.repository import ROOT

PLANE = "bench"
OPTIONS = (*QUIET, "--plane", PLANE)  # each benchmark's, after its name


@pytest.fixture(scope="module", autouse=True)
def bench_plane() -> Iterator[None]:
    """The control plane the benchmarks run on, down after them."""
    with control_plane(PLANE):
        yield


def _own_requests(output: str, side: str, verb: str, resource: str) -> int:
    """A side's own requests of `verb` on `resource`, from the table the api benchmark prints for it."""
    table = output.split(f" {side} ", 1)[1].split(f"{side} per job:", 1)[0]
    for row in table.splitlines()[1:]:
        fields = row.split()
        if fields[:2] == [verb, resource]:
            return int(fields[3])
    return 0


def test_admission_against_the_floor_and_both_peers() -> None:
    last = bench("admission", *OPTIONS, "--jobs", "2", "--rounds", "1", "--peer", "--peer-as-shipped")
    assert re.fullmatch(rf"admission jobs=2 operator/floor={FIGURE} operator/peer={FIGURE}", last), last


def test_latency_beside_a_hostile_tenant_and_the_peer() -> None:
    args = ("--jobs", "3", "--failures", "3", "--rate", "5", "--rounds", "1", "--hostile-neighbour", "--peer")
    last = bench("latency", *OPTIONS, *args)
    expected = rf"latency jobs=3 p50={FIGURE}s p99={FIGURE}s "
    expected += rf"operator-beside-hostile_p50={FIGURE}s operator-beside-hostile_p99={FIGURE}s "
    expected += rf"operator-beside-hostile_p99_ratio={FIGURE} peer_p50={FIGURE}s peer_p99={FIGURE}s"
    assert re.fullmatch(expected, last), last


def test_api_requests_attributed_to_each_side() -> None:
    output = bench_output("api", *OPTIONS, "--jobs", "2", "--logs-unkept", "--peer")
    last = output.splitlines()[-1]
    pattern = rf"api jobs=2 requests/job=({FIGURE}) writes/job=({FIGURE}) minimum=16 "
    pattern += rf"operator-logs-unkept_requests/job=({FIGURE}) operator-logs-unkept_writes/job=({FIGURE}) "
    pattern += rf"peer_requests/job=({FIGURE}) peer_writes/job=({FIGURE})"
    figures = re.fullmatch(pattern, last)
    assert figures, last
    writes, unkept_writes, peer_writes = float(figures[2]), float(figures[4]), float(figures[6])
    assert unkept_writes >= 16  # a Service, 7 pods, Running and Succeeded, 6 pods deleted
    assert writes >= 16
    # Keeping logs costs no write where none can be read (kwok): no finalizer to drop from each of the 7 pods.
    # Status writes may differ by one a job (Created and Running land in one write or in two). The totals
    # are not compared: the others' requests are counted, not attributed, and a kubelet played under load
    # (a status report retried) shows as the operator's.
    assert _own_requests(output, "operator", "PATCH", "pods") == 0, output
    kept_status = _own_requests(output, "operator", "PATCH", "disttrainjobs/status")
    assert kept_status <= _own_requests(output, "operator-logs-unkept", "PATCH", "disttrainjobs/status") + 2, output
    assert peer_writes >= 26  # 7 pods and 7 Services created, 6 of each deleted: a Service per pod


def test_footprint_beside_the_peer() -> None:
    last = bench("footprint", *OPTIONS, "--jobs", "3", "--steady", "1", "--peer")
    pattern = rf"footprint jobs=3 pods=21 peak_rss_mb=\d+ cpu_s={FIGURE} peer_peak_rss_mb=\d+ peer_cpu_s={FIGURE}"
    assert re.fullmatch(pattern, last), last


def test_growth_is_recorded_and_plotted(tmp_path: Path) -> None:
    record = tmp_path / "run.json"
    earlier = {"jobs": 7, "side": "floor", "pods_seconds": 1.0, "services_seconds": 1.0, "cpu_seconds": None}
    record.write_text(json.dumps({"growth": [earlier]}))  # a size measured by an earlier run stays
    bench("--record", str(record), "growth", *OPTIONS, "--jobs", "1", "2", "--peer")
    rows = json.loads(record.read_text())["growth"]
    assert rows[0] == earlier
    assert [(row["jobs"], row["side"]) for row in rows[1:]] == [  # each size starts one side later
        (1, "operator"),
        (1, "floor"),
        (1, "peer"),
        (2, "floor"),
        (2, "peer"),
        (2, "operator"),
    ]
    assert all(row["peak_rss_mb"] > 0 for row in rows if row["side"] != "floor")
    plots = tmp_path / "plots"
    command = [sys.executable, str(ROOT / "bench" / "plot.py"), str(record), str(plots)]
    printed = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    for name in ("admission-seconds.png", "operator-memory.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = [line for line in printed.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [line.split(" | ")[0] for line in table] == ["| 1", "| 2"]  # a row per size, every side measured
