"""The operator's memory and a large job's first plan while a tenant writes what `edit` allows at its bounds,
this checkout's operator beside another checkout's (`--baseline`), one after the other on the same cluster.

Each side gets a namespace of its own where, before its operator starts, a tenant made OBJECTS ConfigMaps
labelled as kept logs that outlive their job and OBJECTS pods labelled as a job's, each carrying about a
megabyte of labels; its operator then lists them (its watches), sweeps the kept logs (every 5 s here) and
plans a suspended ParameterServer job of 1000 PS and 1000 workers, the spec's bounds. Reported: the time
from that job's creation to its Suspended condition (the listings of the tenant's objects included), the
operator's reconciles and their time, and its peak resident memory (VmHWM), which the Deployment's limit
(512Mi) must stay clear of. Run: `python bench/tenant_bounds.py [--baseline DIR]`.
"""

from __future__ import annotations

import argparse
import time
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

from harness import Cluster, OperatorUnderTest, delete_namespaces, local_cluster, namespace, parallel, post

from disttrain_dev.polling import wait_for

LOGS = Path(__file__).resolve().parent / "logs"
OBJECTS = 150  # of each kind: 300 objects of a megabyte, and their sweep's patches, fit etcd's 2 GiB twice
PADDING = {f"pad.example/l{n:04d}": "x" * 63 for n in range(7000)}  # 7000 labels: about 1.1 MB
SIDES_ENV = {"DISTTRAIN_LOG_SWEEP_SECONDS": "5"}
GONE = "disttrain.io/job-gone-since"


def _padded_kept_log(index: int) -> dict[str, Any]:
    labels = {
        "disttrain.io/kept-past-job": "true",
        "disttrain.io/job-uid": f"gone-{index}",
        "disttrain.io/kept-log-of": "worker-0",
        **PADDING,
    }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"kept-{index}", "labels": labels}}


def _padded_pod(index: int) -> dict[str, Any]:
    labels = {"disttrain.io/job-name": "nobody", **PADDING}
    container = {"name": "main", "image": "none"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"padded-{index}", "labels": labels},
            "spec": {"containers": [container], "automountServiceAccountToken": False}}  # fmt: skip


def _large_job() -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "none"}]}}
    replicas = {kind: {"replicas": count, "template": template} for kind, count in (("PS", 1000), ("Worker", 1000))}
    spec = {"strategy": "ParameterServer", "replicaSpecs": replicas, "runPolicy": {"suspend": True}}
    return {"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {"name": "large"}, "spec": spec}


def _suspended(bench: Cluster, scope: str) -> bool:
    path = f"/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs/large"
    conditions = (bench.kube.read(path, {}) or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions)


def _swept(bench: Cluster, scope: str, count: int) -> bool:
    """The first and last padded kept logs marked: one sweep marks them all, and reading every one would cost
    the API server more than the operator's whole sweep."""
    for index in (0, count - 1):
        found = bench.kube.read(f"/api/v1/namespaces/{scope}/configmaps/kept-{index}", {}) or {}
        if GONE not in ((found.get("metadata") or {}).get("annotations") or {}):
            return False
    return True


def _create(bench: Cluster, collection: str, manifests: list[dict[str, Any]]) -> None:
    parallel([partial(post, bench, collection, manifest) for manifest in manifests])


def side(name: str, source: str | None, count: int) -> str:
    """One operator's figures: the tenant's objects made first, then the operator and the large job."""
    bench = local_cluster()
    with namespace(bench, f"tenant-{name}") as scope:
        _create(bench, f"/api/v1/namespaces/{scope}/configmaps", [_padded_kept_log(i) for i in range(count)])
        _create(bench, f"/api/v1/namespaces/{scope}/pods", [_padded_pod(i) for i in range(count)])
        operator = OperatorUnderTest(bench, [scope], LOGS / f"{scope}.log", env=SIDES_ENV, source=source)
        try:
            started = time.monotonic()
            post(bench, f"/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs", _large_job())
            wait_for("the large job's Suspended condition", partial(_suspended, bench, scope), timeout=600)
            planned = time.monotonic() - started
            wait_for("the padded kept logs marked", partial(_swept, bench, scope, count), timeout=600, interval=1)
            usage, reconciles = operator.usage(), _reconciles(operator.metrics_url)
        finally:
            operator.stop()
    return (
        f"{name}: {count} padded kept logs and pods; large job Suspended {planned:.1f} s after its creation,"
        f" {reconciles[0]:.0f} reconciles taking {reconciles[1]:.2f} s in all;"
        f" peak RSS {usage.peak_rss_mb:.0f} MB; CPU {usage.cpu_seconds:.1f} s"
    )


def _reconciles(metrics_url: str) -> tuple[float, float]:
    """How many reconciles the operator made, and their time in all (`controller_runtime_reconcile_time_seconds`)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as answer:
        text = answer.read().decode()
    found = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        for part in found:
            if line.startswith(f"controller_runtime_reconcile_time_seconds_{part}"):
                found[part] += float(line.rsplit(" ", 1)[1])
    return found["count"], found["sum"]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench/tenant_bounds.py", description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=OBJECTS)
    parser.add_argument("--baseline", help="another checkout whose operator runs as a side")
    parser.add_argument("--baseline-first", action="store_true", help="the other side first (one order a run)")
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    lines = []
    try:
        sides = [("operator", None), *([("baseline", args.baseline)] if args.baseline else [])]
        for name, source in reversed(sides) if args.baseline_first else sides:
            lines.append(side(name, source, args.objects))
            print(lines[-1], flush=True)
    finally:
        delete_namespaces(local_cluster())
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
