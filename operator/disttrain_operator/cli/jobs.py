"""`disttrain jobs` (also `kubectl disttrain`): what admins ask of many jobs, in one command.

`list` shows every job with per-replica ready counts, restarts and progress; `describe` one job's
conditions, progress, pods and Events; `logs` a replica's log. The tables are pure functions of
the jobs the client (`disttrain.Client`) returns; `run` fetches them through it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from disttrain import Client, DisttrainError, JobEvent
from disttrain.resources import RESOURCES

from disttrain_contract.timestamps import format_time
from disttrain_operator.api.job import DistTrainJob

Object = Mapping[str, Any]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _replicas(job: DistTrainJob) -> str:
    """`Worker 3/4, PS 1/1`: ready over desired, per replica type."""
    statuses = job.status.replica_statuses
    return ", ".join(
        f"{kind.value} {statuses[kind].ready if kind in statuses else 0}/{spec.replicas}"
        for kind, spec in job.spec.replica_specs.items()
    )


def _progress(job: DistTrainJob) -> str:
    progress = job.status.progress
    if progress is None or progress.step is None:
        return "-"
    total = f"/{progress.total_steps}" if progress.total_steps is not None else ""
    loss = f" loss {progress.loss:.4g}" if progress.loss is not None else ""
    return f"step {progress.step}{total}{loss}"


def _evaluation(job: DistTrainJob) -> str:
    scores = job.status.evaluation
    if scores is None:
        return "-"
    metrics = " ".join(f"{name} {value:.4g}" for name, value in sorted(scores.metrics.items()))
    step = f"step {scores.step} " if scores.step is not None else ""
    return f"{step}{metrics}" + (" (final checkpoint)" if scores.final else "")


def list_table(jobs: Sequence[DistTrainJob], all_namespaces: bool) -> str:
    header = ["NAMESPACE"] * all_namespaces + ["NAME", "PHASE", "REPLICAS (READY)", "RESTARTS", "PROGRESS"]
    rows = [
        [job.metadata.namespace] * all_namespaces
        + [job.metadata.name, job.status.phase or "-", _replicas(job), str(job.status.restart_count), _progress(job)]
        for job in sorted(jobs, key=lambda job: (job.metadata.namespace, job.metadata.name))
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


def describe_text(job: DistTrainJob, pods: Sequence[Object], events: Sequence[JobEvent]) -> str:
    status = job.status
    lines = [
        f"Name:       {job.metadata.name}",
        f"Namespace:  {job.metadata.namespace}",
        f"Strategy:   {job.spec.strategy.value}",
        f"Phase:      {status.phase or '-'}",
        f"Replicas:   {_replicas(job)}",
        f"Restarts:   {status.restart_count}",
        f"Progress:   {_progress(job)}",
        f"Evaluation: {_evaluation(job)}",
        f"Started:    {_time(status.start_time)}",
        f"Completed:  {_time(status.completion_time)}",
        "",
        "Conditions:",
    ]
    conditions = [[c.type.value, c.status.value, c.reason, c.message] for c in status.conditions]
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
    event_rows = [[_time(event.time), event.type, event.reason, event.object, event.message] for event in events]
    lines.append(_indent(_table(["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], event_rows)))
    return "\n".join(lines)


def _time(moment: datetime | None) -> str:
    return format_time(moment) if moment is not None else "-"


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


def run(argv: Sequence[str] | None = None, client: Client | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        client = client or Client()
        namespace = args.namespace
        if args.action == "list":
            jobs = client.list(namespace=namespace, all_namespaces=args.all_namespaces, kind=args.kind)
            sys.stdout.write(list_table(jobs, args.all_namespaces))
        elif args.action == "describe":
            job = client.get(args.name, namespace=namespace, kind=args.kind)
            sys.stdout.write(describe_text(job, client.pods(job), client.events(job)))
        else:
            lines = client.logs(
                args.name, args.replica, namespace=namespace, follow=args.follow, tail=args.tail, kind=args.kind
            )
            for line in lines:
                print(line, flush=args.follow)
    except DisttrainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _parser() -> argparse.ArgumentParser:
    scope = argparse.ArgumentParser(add_help=False)
    scope.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace, else default")
    scope.add_argument(
        "--kind", choices=sorted(RESOURCES), default="DistTrainJob", help="TFJob: Kubeflow TFJobs disttrain serves"
    )
    parser = argparse.ArgumentParser(prog="disttrain jobs", description=__doc__.split("\n")[0])
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser(
        "list", parents=[scope], help="every job: per-replica ready counts, restarts, progress"
    )
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    describe = actions.add_parser("describe", parents=[scope], help="one job: conditions, progress, pods, Events")
    describe.add_argument("name")
    logs = actions.add_parser("logs", parents=[scope], help="a replica's log, streamed")
    logs.add_argument("name")
    logs.add_argument("--replica", help="e.g. worker-1, chief, ps-0 (default: the chief, else worker-0)")
    logs.add_argument("-f", "--follow", action="store_true", help="wait while Pending, go on through restarts")
    logs.add_argument("--tail", type=int, default=None, help="only the last N lines")
    return parser


def kubectl_plugin() -> None:
    """`kubectl disttrain ...`: kubectl finds `kubectl-disttrain` on PATH."""
    sys.exit(run())
