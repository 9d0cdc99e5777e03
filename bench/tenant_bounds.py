"""The operator's memory while a tenant writes what `edit` allows at its bounds, this checkout's operator beside
another checkout's (`--baseline`), one after the other on the same cluster, one scenario at a time:

- `objects`: before the operator starts, OBJECTS ConfigMaps labelled as kept logs that outlive their job, half
  with about a megabyte of labels, half with 20,000 finalizers and a 200 KB value of the sweeper's own mark, and
  OBJECTS pods labelled as a job's with a megabyte of labels; the operator lists them, sweeps the kept logs
  (every 5 s here) and plans a suspended ParameterServer job of 1000 PS and 1000 workers, the spec's bounds.
- `jobs`: JOBS suspended jobs of about a megabyte each (one Worker with 20,000 environment variables), made
  before the operator starts, as a restarted operator finds them; its figure is its peak once each says Suspended.
  With `--viewers N`, a dashboard whose N viewers (ServiceAccounts of the namespace) each open its list page.
- `running`: the ParameterServer job of 1000 PS and 1000 workers running on kwok's nodes, from its creation to
  every pod made.

Reported: the operator's (and the dashboard's) peak resident memory (VmHWM), which the Deployment's limit (512Mi,
and 384Mi the dashboard's) must stay clear of; the time the scenario took; its reconciles and their time. Run:
`python bench/tenant_bounds.py [--scenario objects|jobs|running] [--baseline DIR]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from harness import (
    Cluster,
    OperatorUnderTest,
    ProcessUnderTest,
    delete_namespaces,
    devcluster_kubectl,
    ensure_capacity,
    free_port,
    local_cluster,
    namespace,
    parallel,
    post,
    source_path,
)

from disttrain_dev.polling import wait_for
from disttrain_dev.third_party import answers

LOGS = Path(__file__).resolve().parent / "logs"
USER_ROLES = Path(__file__).resolve().parents[1] / "deploy" / "user-roles" / "roles.yaml"
OBJECTS = 150  # of each kind: 300 objects of a megabyte, and their sweep's patches, fit etcd's 2 GiB twice
JOBS = 100
PADDING = {f"pad.example/l{n:04d}": "x" * 63 for n in range(7000)}  # 7000 labels: about 1.1 MB
FINALIZERS = [f"pad.example/f{n:05d}" for n in range(20_000)]  # about 460 KB
MARK = "x" * 200_000  # a value of the sweeper's own annotation, as long as a tenant may write
ENV = [{"name": f"PAD_{n:05d}", "value": "x" * 30} for n in range(20_000)]  # about 1 MB
SIDES_ENV = {"DISTTRAIN_LOG_SWEEP_SECONDS": "5"}
GONE = "disttrain.io/job-gone-since"
JOBS_PATH = "/apis/disttrain.io/v1alpha1/namespaces/{scope}/disttrainjobs"


def _padded_kept_log(index: int) -> dict[str, Any]:
    labels = {
        "disttrain.io/kept-past-job": "true",
        "disttrain.io/job-uid": f"gone-{index}",
        "disttrain.io/kept-log-of": "worker-0",
    }
    metadata: dict[str, Any] = {"name": f"kept-{index}", "labels": labels}
    if index % 2:
        metadata.update(finalizers=FINALIZERS, annotations={GONE: MARK})
    else:
        labels.update(PADDING)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def _padded_pod(index: int) -> dict[str, Any]:
    labels = {"disttrain.io/job-name": "nobody", **PADDING}
    container = {"name": "main", "image": "none"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"padded-{index}", "labels": labels},
            "spec": {"containers": [container], "automountServiceAccountToken": False}}  # fmt: skip


def _job(name: str, replicas: dict[str, int], container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "tensorflow", "image": "none", **container}]}}
    replica_specs = {kind: {"replicas": count, "template": template} for kind, count in replicas.items()}
    return {"apiVersion": "disttrain.io/v1alpha1", "kind": "DistTrainJob", "metadata": {"name": name},
            "spec": {"replicaSpecs": replica_specs, **spec}}  # fmt: skip


def _large_job(*, suspend: bool) -> dict[str, Any]:
    return _job("large", {"PS": 1000, "Worker": 1000}, {}, strategy="ParameterServer", runPolicy={"suspend": suspend})


def _heavy_job(index: int) -> dict[str, Any]:
    return _job(
        f"heavy-{index}", {"Worker": 1}, {"env": ENV}, strategy="MultiWorkerMirrored", runPolicy={"suspend": True}
    )


def _suspended(bench: Cluster, scope: str, name: str) -> bool:
    path = f"{JOBS_PATH.format(scope=scope)}/{name}"
    conditions = (bench.kube.read(path, {}) or {}).get("status", {}).get("conditions") or []
    return any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions)


def _all_suspended(bench: Cluster, scope: str, count: int) -> bool:
    """Every heavy job says Suspended: read as a table, so that the benchmark holds no job's spec."""
    path = JOBS_PATH.format(scope=scope)
    accept = "application/json;as=Table;g=meta.k8s.io;v=v1"
    table = bench.kube.json_request("GET", path, {}, query={"limit": "500"}, accept=accept)
    done = [row for row in table.get("rows") or [] if "Suspended" in json.dumps(row.get("cells"))]
    return len(done) >= count


def _swept(bench: Cluster, scope: str, count: int) -> bool:
    """The first and last padded kept logs marked: one sweep marks them all, and reading every one would cost
    the API server more than the operator's whole sweep."""
    for index in (0, count - 2):
        found = bench.kube.read(f"/api/v1/namespaces/{scope}/configmaps/kept-{index}", {}) or {}
        if GONE not in ((found.get("metadata") or {}).get("annotations") or {}):
            return False
    return True


def _pods_made(bench: Cluster, scope: str) -> int:
    return sum(1 for _ in bench.kube.list_metadata(f"/api/v1/namespaces/{scope}/pods", {}))


def _create(bench: Cluster, collection: str, manifests: list[dict[str, Any]]) -> None:
    parallel([partial(post, bench, collection, manifest) for manifest in manifests])


def _release(bench: Cluster, scope: str, count: int) -> None:
    """Drop the padded kept logs' finalizers, which nothing else would: the namespace could not go."""
    patch = {"metadata": {"finalizers": None}}
    for index in range(1, count, 2):
        bench.kube.request(
            "PATCH", f"/api/v1/namespaces/{scope}/configmaps/kept-{index}", {}, patch,
            content_type="application/merge-patch+json",
        )  # fmt: skip


class DashboardUnderTest(ProcessUnderTest):
    """`disttrain dashboard --authenticate` as a process whose memory can be read."""

    def __init__(self, bench: Cluster, log: Path, source: str | None) -> None:
        self.port = free_port()
        command = [sys.executable, "-m", "disttrain_cli.main", "dashboard", "--authenticate", f"--port={self.port}"]
        environment = {"KUBECONFIG": str(bench.kubeconfig), "PATH": "/usr/bin:/bin"}
        if source is not None:
            environment["PYTHONPATH"] = source_path(source)
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                command, stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )
        wait_for("the dashboard", lambda: answers(f"http://127.0.0.1:{self.port}/healthz"), timeout=60, interval=0.5)

    def open_list_page(self, token: str, scope: str) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/?namespace={scope}", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status)


def _viewer_tokens(bench: Cluster, scope: str, count: int) -> list[str]:
    """`count` ServiceAccounts of `scope` bound to Kubernetes' `view` there (which takes disttrain's rules by
    aggregation), and a token of each."""
    devcluster_kubectl(bench, "apply", "--server-side", "-f", str(USER_ROLES))
    tokens = []
    for index in range(count):
        account = f"viewer-{index}"
        devcluster_kubectl(bench, "create", "serviceaccount", account, "-n", scope)
        devcluster_kubectl(
            bench,
            "create",
            "rolebinding",
            account,
            "-n",
            scope,
            "--clusterrole=view",
            f"--serviceaccount={scope}:{account}",
        )
        tokens.append(devcluster_kubectl(bench, "create", "token", account, "-n", scope).strip())
    return tokens


@contextmanager
def _operator(bench: Cluster, scope: str, name: str, source: str | None) -> Iterator[OperatorUnderTest]:
    operator = OperatorUnderTest(bench, [scope], LOGS / f"{scope}.log", env=SIDES_ENV, source=source)
    try:
        yield operator
    finally:
        operator.stop()


def objects(bench: Cluster, name: str, source: str | None, count: int) -> str:
    """The tenant's padded objects first, then the operator and the large job, suspended."""
    with namespace(bench, f"tenant-{name}") as scope:
        _create(bench, f"/api/v1/namespaces/{scope}/configmaps", [_padded_kept_log(i) for i in range(count)])
        _create(bench, f"/api/v1/namespaces/{scope}/pods", [_padded_pod(i) for i in range(count)])
        try:
            with _operator(bench, scope, name, source) as operator:
                started = time.monotonic()
                post(bench, JOBS_PATH.format(scope=scope), _large_job(suspend=True))
                wait_for("the large job's Suspended condition", partial(_suspended, bench, scope, "large"), timeout=600)
                planned = time.monotonic() - started
                wait_for("the padded kept logs marked", partial(_swept, bench, scope, count), timeout=600, interval=1)
                usage, reconciles = operator.usage(), _reconciles(operator.metrics_url)
        finally:
            _release(bench, scope, count)
    return (
        f"{name} objects: {count} padded kept logs and pods; large job Suspended {planned:.1f} s after its creation,"
        f" {reconciles[0]:.0f} reconciles taking {reconciles[1]:.2f} s in all;"
        f" peak RSS {usage.peak_rss_mb:.0f} MiB; CPU {usage.cpu_seconds:.1f} s"
    )


def jobs(bench: Cluster, name: str, source: str | None, count: int, viewers: int) -> str:
    """The tenant's heavy jobs first, then the operator (as one restarted finds them), and the dashboard."""
    with namespace(bench, f"tenant-{name}") as scope:
        _create(bench, JOBS_PATH.format(scope=scope), [_heavy_job(i) for i in range(count)])
        with _operator(bench, scope, name, source) as operator:
            started = time.monotonic()
            wait_for("every heavy job Suspended", partial(_all_suspended, bench, scope, count), timeout=900, interval=2)
            took = time.monotonic() - started
            usage, reconciles = operator.usage(), _reconciles(operator.metrics_url)
        shown = ""
        if viewers:
            tokens = _viewer_tokens(bench, scope, viewers)
            dashboard = DashboardUnderTest(bench, LOGS / f"{scope}-dashboard.log", source)
            try:
                answered = [dashboard.open_list_page(token, scope) for token in tokens]
                shown = (
                    f"; the dashboard, {viewers} viewers' list pages ({answered.count(200)} answered 200):"
                    f" peak RSS {dashboard.usage().peak_rss_mb:.0f} MiB"
                )
            finally:
                dashboard.stop()
    return (
        f"{name} jobs: {count} suspended jobs of about 1 MB, each Suspended {took:.1f} s after the operator's start,"
        f" {reconciles[0]:.0f} reconciles taking {reconciles[1]:.2f} s in all;"
        f" peak RSS {usage.peak_rss_mb:.0f} MiB; CPU {usage.cpu_seconds:.1f} s{shown}"
    )


def running(bench: Cluster, name: str, source: str | None) -> str:
    """The large job running: every one of its 2,001 pods made on kwok's nodes."""
    ensure_capacity(bench, 2001)
    with namespace(bench, f"tenant-{name}") as scope, _operator(bench, scope, name, source) as operator:
        started = time.monotonic()
        post(bench, JOBS_PATH.format(scope=scope), _large_job(suspend=False))
        wait_for("every pod of the large job", lambda: _pods_made(bench, scope) >= 2000, timeout=900, interval=2)
        took = time.monotonic() - started
        usage, reconciles = operator.usage(), _reconciles(operator.metrics_url)
    return (
        f"{name} running: 1000 PS and 1000 workers, every pod made {took:.1f} s after the job's creation,"
        f" {reconciles[0]:.0f} reconciles taking {reconciles[1]:.2f} s in all;"
        f" peak RSS {usage.peak_rss_mb:.0f} MiB; CPU {usage.cpu_seconds:.1f} s"
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
    parser.add_argument("--scenario", choices=("objects", "jobs", "running"), default="objects")
    parser.add_argument("--objects", type=int, default=OBJECTS)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--viewers", type=int, default=0, help="with jobs: a dashboard's viewers")
    parser.add_argument("--baseline", help="another checkout whose operator runs as a side")
    parser.add_argument("--baseline-first", action="store_true", help="the other side first (one order a run)")
    args = parser.parse_args(argv)
    LOGS.mkdir(parents=True, exist_ok=True)
    scenarios: dict[str, Callable[[Cluster, str, str | None], str]] = {
        "objects": lambda bench, name, source: objects(bench, name, source, args.objects),
        "jobs": lambda bench, name, source: jobs(bench, name, source, args.jobs, args.viewers),
        "running": running,
    }
    bench = local_cluster()
    lines = []
    try:
        sides = [("operator", None), *([("baseline", args.baseline)] if args.baseline else [])]
        for name, source in reversed(sides) if args.baseline_first else sides:
            lines.append(scenarios[args.scenario](bench, name, source))
            print(lines[-1], flush=True)
    finally:
        delete_namespaces(bench)
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
