"""`disttrain jobs` (also `kubectl disttrain`): what admins ask of many jobs, in one command.

`list` shows every job with per-replica ready counts, restarts and progress; `describe` one job's
conditions, progress, pods and Events; `logs` a replica's log. The tables are pure functions of
the objects the API returns; `run` fetches them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from disttrain_operator.api.job import GROUP, PLURAL, VERSION
from disttrain_operator.core.builders.naming import JOB_NAME_LABEL
from disttrain_operator.runtime.kube import Kube, TransientApiError, load_client

Object = Mapping[str, Any]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _replicas(job: Object) -> str:
    """`Worker 3/4, PS 1/1`: ready over desired, per replica type."""
    statuses = job.get("status", {}).get("replicaStatuses", {})
    parts = []
    for kind, spec in job["spec"]["replicaSpecs"].items():
        ready = statuses.get(kind, {}).get("ready", 0)
        parts.append(f"{kind} {ready}/{spec.get('replicas', 1)}")
    return ", ".join(parts)


def _progress(job: Object) -> str:
    progress = job.get("status", {}).get("progress") or {}
    if "step" not in progress:
        return "-"
    total = f"/{progress['totalSteps']}" if "totalSteps" in progress else ""
    loss = f" loss {progress['loss']:.4g}" if isinstance(progress.get("loss"), float | int) else ""
    return f"step {progress['step']}{total}{loss}"


def list_table(jobs: Sequence[Object], all_namespaces: bool) -> str:
    header = ["NAMESPACE"] * all_namespaces + ["NAME", "PHASE", "REPLICAS (READY)", "RESTARTS", "PROGRESS"]
    rows = [
        [job["metadata"]["namespace"]] * all_namespaces
        + [
            job["metadata"]["name"],
            job.get("status", {}).get("phase", "-"),
            _replicas(job),
            str(job.get("status", {}).get("restartCount", 0)),
            _progress(job),
        ]
        for job in sorted(jobs, key=lambda job: (job["metadata"]["namespace"], job["metadata"]["name"]))
    ]
    return _table(header, rows)


def _pod_state(pod: Object) -> str:
    status = pod.get("status", {})
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated:
            return f"{status.get('phase')} (exit {terminated.get('exitCode')}, {terminated.get('reason', '')})"
    return str(status.get("phase", "Pending"))


def describe_text(job: Object, pods: Sequence[Object], events: Sequence[Object]) -> str:
    status = job.get("status", {})
    metadata = job["metadata"]
    lines = [
        f"Name:       {metadata['name']}",
        f"Namespace:  {metadata['namespace']}",
        f"Strategy:   {job['spec'].get('strategy', 'MultiWorkerMirrored')}",
        f"Phase:      {status.get('phase', '-')}",
        f"Replicas:   {_replicas(job)}",
        f"Restarts:   {status.get('restartCount', 0)}",
        f"Progress:   {_progress(job)}",
        f"Started:    {status.get('startTime', '-')}",
        f"Completed:  {status.get('completionTime', '-')}",
        "",
        "Conditions:",
    ]
    conditions = [
        [c["type"], c["status"], c.get("reason", ""), c.get("message", "")] for c in status.get("conditions", [])
    ]
    lines.append(_indent(_table(["TYPE", "STATUS", "REASON", "MESSAGE"], conditions)))
    lines.append("Pods:")
    pod_rows = [
        [
            pod["metadata"]["name"],
            _pod_state(pod),
            pod["spec"].get("nodeName", "-"),
            pod.get("status", {}).get("podIP", "-"),
            str(sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses") or [])),
        ]
        for pod in sorted(pods, key=lambda pod: pod["metadata"]["name"])
    ]
    lines.append(_indent(_table(["NAME", "STATE", "NODE", "IP", "RESTARTS"], pod_rows)))
    lines.append("Events:")
    event_rows = [
        [_when(event), event.get("type", ""), event["reason"], event.get("message", "")]
        for event in sorted(events, key=_when)
    ]
    lines.append(_indent(_table(["LAST SEEN", "TYPE", "REASON", "MESSAGE"], event_rows)))
    return "\n".join(lines)


def _when(event: Object) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "-")


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


_JOBS = f"/apis/{GROUP}/{VERSION}"


def _fetch_jobs(kube: Kube, namespace: str | None) -> list[dict[str, Any]]:
    path = f"{_JOBS}/namespaces/{namespace}/{PLURAL}" if namespace else f"{_JOBS}/{PLURAL}"
    return kube.list_items(path, {})


def run(argv: Sequence[str] | None = None, kube: Kube | None = None) -> int:
    args = _parser().parse_args(argv)
    kube = kube or Kube(load_client())
    namespace = None if args.all_namespaces else args.namespace
    try:
        if args.action == "list":
            sys.stdout.write(list_table(_fetch_jobs(kube, namespace), args.all_namespaces))
            return 0
        job = kube.read(
            f"{_JOBS}/namespaces/{{namespace}}/{PLURAL}/{{name}}", {"namespace": args.namespace, "name": args.name}
        )
        if job is None:
            print(f"error: no DistTrainJob {args.namespace}/{args.name}", file=sys.stderr)
            return 1
        if args.action == "describe":
            pods = kube.list_items(
                f"/api/v1/namespaces/{args.namespace}/pods", {"labelSelector": f"{JOB_NAME_LABEL}={args.name}"}
            )
            events = kube.list_items(
                f"/api/v1/namespaces/{args.namespace}/events",
                {"fieldSelector": f"involvedObject.name={args.name},involvedObject.kind=DistTrainJob"},
            )
            sys.stdout.write(describe_text(job, pods, events))
            return 0
        pod = f"{args.name}-{args.replica}"
        sys.stdout.write(kube.pod_log(args.namespace, pod, args.tail))
    except TransientApiError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("-n", "--namespace", default="default")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="with list: every namespace")
    parser = argparse.ArgumentParser(prog="disttrain jobs", description=__doc__.split("\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[scope], help="every job: per-replica ready counts, restarts, progress")
    describe = actions.add_parser("describe", parents=[scope], help="one job: conditions, progress, pods, Events")
    describe.add_argument("name")
    logs = actions.add_parser("logs", parents=[scope], help="a replica's log")
    logs.add_argument("name")
    logs.add_argument("replica", help="e.g. worker-0, chief-0, ps-1")
    logs.add_argument("--tail", type=int, default=None)
    return parser


def kubectl_plugin() -> None:
    """`kubectl disttrain ...`: kubectl finds `kubectl-disttrain` on PATH."""
    sys.exit(run())
