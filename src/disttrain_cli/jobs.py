"""`disttrain jobs` (also `kubectl disttrain`): what admins ask of many jobs, as kubectl asks it.

`get` (or `list`) shows jobs with ready pods, restarts, progress and age, `-o wide|yaml|json|name`,
`-l` selectors and `--watch`; `describe` one job's conditions, progress, pods and Events; `logs` a
replica's log, from its pod or as kept after it; `tensorboard` forwards a local port to the job's
TensorBoard. Every call goes through the client (`disttrain.Client`); the tables are `job_tables`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any, TypeVar

import click
from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from disttrain import Client, DisttrainError, DistTrainJob
from disttrain.client import WatchEvent
from disttrain.job_kinds import RESOURCES, JobKind, readable_jobs, resource_of
from disttrain_cli import job_tables
from disttrain_cli.main import invoke
from disttrain_core.api import yaml_io

OUTPUTS = ("wide", "yaml", "json", "name")
Command = TypeVar("Command", bound=Callable[..., Any])


@dataclass(frozen=True)
class Where:
    """Where the jobs are: kubectl's -n, --context and --kubeconfig, and which kind of job."""

    namespace: str | None
    context: str | None
    kubeconfig: str | None
    kind: JobKind

    def client(self) -> Client:
        return Client(kubeconfig=self.kubeconfig, context=self.context)


def _where_options(command: Command) -> Command:
    """The options of `Where`, handed to the command as one `where` argument."""

    @wraps(command)
    def run(*, namespace: str | None, context: str | None, kubeconfig: str | None, kind: str, **rest: Any) -> Any:
        return command(where=Where(namespace, context, kubeconfig, resource_of(kind).kind), **rest)

    options = [
        click.option(
            "-n", "--namespace", help="default: the kubeconfig context's namespace, else default",
            shell_complete=_complete_namespaces,
        ),
        click.option("--context", help="the kubeconfig context (default: its current one)"),
        click.option("--kubeconfig", help="default: KUBECONFIG, else ~/.kube/config, else in-cluster"),
        click.option(
            "--kind", type=click.Choice(sorted(RESOURCES)), default="DistTrainJob", show_default=True,
            help="TFJob: Kubeflow TFJobs disttrain serves",
        ),
    ]  # fmt: skip
    decorated: Any = run
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def _where_of(ctx: click.Context) -> Where:
    """The options given so far, while the shell completes the rest."""
    params = ctx.params
    kind = resource_of(params.get("kind") or "DistTrainJob").kind
    return Where(params.get("namespace"), params.get("context"), params.get("kubeconfig"), kind)


def _reported(command: Command) -> Command:
    """A client's typed error is one line on stderr and status 1; Ctrl-C is status 130."""

    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> int:
        try:
            result: int = command(*args, **kwargs)
        except DisttrainError as error:
            click.echo(f"error: {error}", err=True)
            return 1
        except KeyboardInterrupt:
            return 130
        return result

    return run  # type: ignore[return-value]


def _complete_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    """Job names for shell completion, read with the options given so far; none where the API says no."""
    where = _where_of(ctx)
    try:
        jobs = where.client().list(namespace=where.namespace, kind=where.kind)
    except (DisttrainError, OSError, ValueError):
        return []
    return sorted(job.metadata.name for job in jobs if job.metadata.name.startswith(incomplete))


def _complete_namespaces(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    where = _where_of(ctx)
    try:
        jobs = where.client().list(all_namespaces=True, kind=where.kind)
    except (DisttrainError, OSError, ValueError):
        return []
    return sorted({job.metadata.namespace for job in jobs if job.metadata.namespace.startswith(incomplete)})


def console() -> Console:
    """Colour and the terminal's width on a terminal; elsewhere plain text, and no line is ever cut."""
    terminal = Console()
    return terminal if terminal.is_terminal else Console(width=1_000_000, no_color=True, highlight=False)


def emit(out: Console, renderable: RenderableType) -> None:
    """Print without the trailing blanks rich pads a table's last column with."""
    with out.capture() as captured:
        out.print(renderable)
    sys.stdout.write("".join(f"{line.rstrip()}\n" for line in captured.get().splitlines()))
    sys.stdout.flush()


@click.group("jobs", context_settings={"help_option_names": ["-h", "--help"]})
def jobs() -> None:
    """List, describe and read the logs of jobs (also `kubectl disttrain`)."""


@jobs.command("get")
@click.argument("names", nargs=-1, shell_complete=_complete_names)
@_where_options
@click.option("-A", "--all-namespaces", is_flag=True, help="every namespace")
@click.option("-l", "--selector", help="a label selector, as kubectl's: team=vision,tier!=dev")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), help="wide adds columns; yaml, json and name as kubectl")
@click.option("-w", "--watch", is_flag=True, help="after the listing, each change as it happens")
@_reported
def get_command(
    *, names: tuple[str, ...], where: Where, all_namespaces: bool, selector: str | None, output: str | None, watch: bool
) -> int:
    """Jobs with their phase, ready pods, restarts, progress and age (NAMES: only these)."""
    client, namespace, job_kind = where.client(), where.namespace, where.kind
    if watch:
        events = client.watch(namespace=namespace, all_namespaces=all_namespaces, labels=selector, kind=job_kind)
        _print_changes((event for event in events if not names or event.job.metadata.name in names), output,
                       all_namespaces=all_namespaces)  # fmt: skip
        return 0
    if names:
        bodies = [client.get_object(name, namespace=namespace, kind=job_kind) for name in names]
    else:
        bodies = client.list_objects(namespace=namespace, all_namespaces=all_namespaces, labels=selector, kind=job_kind)
    _print_listing(bodies, output, all_namespaces=all_namespaces, single=len(names) == 1)
    return 0


jobs.add_command(get_command, "list")


def _print_listing(bodies: Sequence[dict[str, Any]], output: str | None, *, all_namespaces: bool, single: bool) -> None:
    if output in ("json", "yaml"):
        document: Any = bodies[0] if single else {"apiVersion": "v1", "kind": "List", "items": list(bodies)}
        sys.stdout.write(_serialized(document, output))
        return
    if output == "name":
        sys.stdout.writelines(f"{_name(body)}\n" for body in bodies)
        return
    if not bodies:
        click.echo("No jobs found.", err=True)
        return
    typed = list(readable_jobs(bodies))
    emit(console(), job_tables.jobs_table(typed, all_namespaces=all_namespaces, wide=output == "wide", now=_now()))


def _print_changes(events: Iterable[WatchEvent], output: str | None, *, all_namespaces: bool) -> None:
    """kubectl get --watch: json and yaml one document per change, name one line; a table is redrawn in place
    on a terminal, and elsewhere printed a row per change under one header."""
    out = console()
    if output in ("json", "yaml", "name"):
        for event in events:
            sys.stdout.write(_name(event.body) + "\n" if output == "name" else _serialized(dict(event.body), output))
            sys.stdout.flush()
        return
    wide = output == "wide"
    header = job_tables.header(all_namespaces=all_namespaces, wide=wide)
    if out.is_terminal:
        seen: dict[tuple[str, str], DistTrainJob] = {}
        with Live(job_tables.table(header, []), console=out, auto_refresh=False) as live:
            for event in events:
                key = (event.job.metadata.namespace, event.job.metadata.name)
                if event.type == "DELETED":
                    seen.pop(key, None)
                else:
                    seen[key] = event.job
                live.update(job_tables.jobs_table(list(seen.values()), all_namespaces=all_namespaces, wide=wide,
                                                  now=_now()), refresh=True)  # fmt: skip
        return
    widths = [len(name) for name in header]
    for number, event in enumerate(events):
        cells = job_tables.job_cells(event.job, all_namespaces=all_namespaces, wide=wide, now=_now())
        if event.type == "DELETED":
            cells[header.index("PHASE")] = Text("Deleted")
        widths = [max(width, len(str(cell))) for width, cell in zip(widths, cells, strict=True)]
        grid = job_tables.table(header, [cells], widths=widths)
        grid.show_header = number == 0
        emit(out, grid)


def _serialized(document: Any, output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2) + "\n"
    return "---\n" + yaml_io.dump(document)


def _name(body: Any) -> str:
    resource = resource_of(str(body.get("kind", "DistTrainJob")))
    return f"{resource.plural[:-1]}.{resource.group}/{body['metadata']['name']}"


def _now() -> datetime:
    return datetime.now(UTC)


@jobs.command("describe")
@click.argument("name", shell_complete=_complete_names)
@_where_options
@_reported
def describe_command(*, name: str, where: Where) -> int:
    """One job: conditions, progress, pods and Events."""
    client = where.client()
    job = client.get(name, namespace=where.namespace, kind=where.kind)
    emit(console(), job_tables.describe(job, client.pods(job), client.events(job)))
    return 0


@jobs.command("logs")
@click.argument("name", shell_complete=_complete_names)
@_where_options
@click.option("--replica", help="e.g. worker-1, chief, ps-0 (default: the chief, else worker-0)")
@click.option("-f", "--follow", is_flag=True, help="wait while Pending, go on through restarts")
@click.option("--tail", type=int, help="only the last N lines")
@click.option("--attempt", type=int, help="the replica's Nth pod, from 1 (default: the pod now, else the last)")
@_reported
def logs_command(
    *, name: str, where: Where, replica: str | None, follow: bool, tail: int | None, attempt: int | None
) -> int:
    """A replica's log, streamed: from its pod, or as kept after it."""
    lines = where.client().logs(
        name, replica, attempt=attempt, namespace=where.namespace, follow=follow, tail=tail, kind=where.kind
    )
    for line in lines:
        click.echo(line)
        if follow:
            sys.stdout.flush()
    return 0


@jobs.command("tensorboard")
@click.argument("name", shell_complete=_complete_names)
@_where_options
@click.option("--port", type=int, default=0, help="the local port (default: a free one)")
@_reported
def tensorboard_command(*, name: str, where: Where, port: int) -> int:
    """Forward a local port to the job's TensorBoard and print its URL."""
    forward = where.client().tensorboard(name, namespace=where.namespace, kind=where.kind, local_port=port)
    with forward as board:
        click.echo(board.url)
        sys.stdout.flush()
        click.echo(f"TensorBoard of {name}, reached by {board.route}; Ctrl-C stops", err=True)
        board.wait()
    return 0


def kubectl_plugin() -> None:
    """`kubectl disttrain ...`: kubectl finds `kubectl-disttrain` on PATH."""
    sys.exit(invoke(jobs, None, "kubectl disttrain"))
