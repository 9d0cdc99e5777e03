"""Commands over manifests, with no cluster: `render`, `convert`, `crd` and `local run`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from disttrain_cli.render import RenderError, render
from disttrain_core.api import crd
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise RenderError(f"{source}: no such file")
    return path.read_text(encoding="utf-8")


def _print_or_fail(source: str, produce: Callable[[str], str]) -> int:
    """Print what `produce` makes of the input; a user's mistake is one line on stderr and status 1."""
    try:
        sys.stdout.write(produce(_read_input(source)))
    except (RenderError, UnicodeDecodeError) as error:
        label = "<stdin>" if source == "-" else source
        click.echo(f"error: {label}: {error}", err=True)
        return 1
    return 0


@click.command("render")
@click.argument("file")
@click.option("--namespace", help="namespace for manifests that name none (default: default)")
@click.option("--cluster-domain", help="append this domain to TF_CONFIG addresses")
@click.option(
    "--gang-scheduler",
    type=click.Choice([scheduler.value for scheduler in GangScheduler]),
    default=GangScheduler.SCHEDULER_PLUGINS.value,
    show_default=True,
    help="whose PodGroup a gang gets",
)
@click.option(
    "--gang-by-default", is_flag=True, help="as an operator with DISTTRAIN_GANG_BY_DEFAULT: every job is a gang"
)
@click.option(
    "--no-network-policy",
    is_flag=True,
    help="as an operator with DISTTRAIN_NETWORK_POLICY=false: no NetworkPolicy closes the job's trainers",
)
@click.option(
    "--no-restart-in-place",
    is_flag=True,
    help="as an operator with DISTTRAIN_RESTART_IN_PLACE=false: whole-job restarts recreate the pods",
)
def render_command(
    file: str,
    *,
    namespace: str | None,
    cluster_domain: str | None,
    gang_scheduler: str,
    gang_by_default: bool,
    no_network_policy: bool,
    no_restart_in_place: bool,
) -> int:
    """Validate a DistTrainJob manifest and print every object the operator would create.

    FILE is a manifest file, or - for standard input.
    """
    settings = BuildSettings(
        cluster_domain=cluster_domain,
        gang_scheduler=GangScheduler(gang_scheduler),
        gang_by_default=gang_by_default,
        network_policy=not no_network_policy,
        restart_in_place=not no_restart_in_place,
    )
    return _print_or_fail(file, lambda text: render(text, settings, namespace=namespace))


@click.command("convert")
@click.argument("file")
def convert_command(file: str) -> int:
    """Turn Kubeflow TFJob manifests into DistTrainJobs, with comments on what changes.

    FILE holds several documents or a List, or is - for standard input.
    """
    from disttrain_cli.convert import convert_text  # noqa: PLC0415

    return _print_or_fail(file, convert_text)


@click.command("crd")
@click.argument("action", type=click.Choice(["generate", "check"]))
@click.option("--dir", "folder", default="crds", show_default=True, help="folder of the CRD file")
def crd_command(action: str, folder: str) -> int:
    """Generate the CRD from the models, or check it did not drift."""
    path = Path(folder)
    if action == "generate":
        click.echo(crd.write(path))
        return 0
    problem = crd.drift(path)
    if problem:
        click.echo(f"error: {problem}", err=True)
        return 1
    click.echo(f"{path} matches the models")
    return 0


@click.group("local")
def local_group() -> None:
    """Run a job on this machine, without Kubernetes."""


@local_group.command("run")
@click.argument("file")
@click.option("--workdir", help="where checkpoints go (DIR/checkpoints); default ./disttrain-<job>")
def local_run_command(file: str, workdir: str | None) -> int:
    """Run every replica as a local process with TF_CONFIG on localhost; exits with the job's outcome.

    FILE is a DistTrainJob manifest, or - for standard input.
    """
    from disttrain.local import run as local_run  # noqa: PLC0415
    from disttrain_core.api import yaml_io  # noqa: PLC0415
    from disttrain_core.api.parsing import parse_job  # noqa: PLC0415
    from disttrain_core.api.validation import InvalidManifestError  # noqa: PLC0415

    try:
        documents = yaml_io.load_all(_read_input(file))
        if len(documents) != 1:
            raise RenderError(f"expected one DistTrainJob, found {len(documents)} documents")
        job = parse_job(documents[0])
    except (RenderError, InvalidManifestError, ValueError) as error:
        click.echo(f"error: {file}: {error}", err=True)
        return 1
    folder = Path(workdir) if workdir else Path.cwd() / f"disttrain-{job.metadata.name}"
    try:
        return local_run.run(job, folder).code
    except (local_run.LocalRunError, OSError) as error:
        click.echo(f"error: {file}: {error}", err=True)
        return 1
