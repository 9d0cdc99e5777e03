"""The `disttrain` command: one entry point for users, CI and the operator image."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from importlib.util import find_spec
from pathlib import Path

from disttrain_operator.api import crd
from disttrain_operator.cli.render import RenderError, render
from disttrain_operator.core.builders.gang import GangScheduler
from disttrain_operator.core.builders.settings import BuildSettings

# Other distributions add subcommands here: each entry point is called with the subparsers to add to.
COMMAND_PLUGINS = "disttrain.commands"


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise RenderError(f"{source}: no such file")
    return path.read_text(encoding="utf-8")


def _render(args: argparse.Namespace) -> int:
    settings = BuildSettings(cluster_domain=args.cluster_domain, gang_scheduler=GangScheduler(args.gang_scheduler))
    try:
        sys.stdout.write(render(_read_input(args.file), settings, namespace=args.namespace))
    except (RenderError, UnicodeDecodeError) as error:
        label = "<stdin>" if args.file == "-" else args.file
        print(f"error: {label}: {error}", file=sys.stderr)
        return 1
    return 0


def _convert(args: argparse.Namespace) -> int:
    from disttrain_operator.cli.convert import convert_text  # noqa: PLC0415

    try:
        sys.stdout.write(convert_text(_read_input(args.file)))
    except (RenderError, UnicodeDecodeError) as error:
        label = "<stdin>" if args.file == "-" else args.file
        print(f"error: {label}: {error}", file=sys.stderr)
        return 1
    return 0


def _crd(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if args.action == "generate":
        print(crd.write(folder))
        return 0
    problem = crd.drift(folder)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    print(f"{folder} matches the models")
    return 0


def _local_run(args: argparse.Namespace) -> int:
    from disttrain_operator.api import yaml_io  # noqa: PLC0415
    from disttrain_operator.api.validation import InvalidManifestError  # noqa: PLC0415
    from disttrain_operator.cli import local_run  # noqa: PLC0415
    from disttrain_operator.cli.render import parse_job  # noqa: PLC0415

    try:
        documents = yaml_io.load_all(_read_input(args.file))
        if len(documents) != 1:
            raise RenderError(f"expected one DistTrainJob, found {len(documents)} documents")
        job = parse_job(documents[0])
    except (RenderError, InvalidManifestError, ValueError) as error:
        print(f"error: {args.file}: {error}", file=sys.stderr)
        return 1
    workdir = Path(args.workdir) if args.workdir else Path.cwd() / f"disttrain-{job.metadata.name}"
    try:
        return local_run.run(job, workdir)
    except (local_run.LocalRunError, OSError) as error:
        print(f"error: {args.file}: {error}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="disttrain", description="Distributed TensorFlow training on Kubernetes.")
    commands = parser.add_subparsers(dest="command", required=True)

    render_parser = commands.add_parser(
        "render", help="validate a DistTrainJob manifest and print every object the operator would create"
    )
    render_parser.add_argument("file", help="manifest file, or - for standard input")
    render_parser.add_argument("--namespace", help="namespace for manifests that name none (default: default)")
    render_parser.add_argument("--cluster-domain", help="append this domain to TF_CONFIG addresses")
    render_parser.add_argument(
        "--gang-scheduler",
        choices=[scheduler.value for scheduler in GangScheduler],
        default=GangScheduler.SCHEDULER_PLUGINS.value,
        help="whose PodGroup a job with a schedulingPolicy gets (default: scheduler-plugins)",
    )
    render_parser.set_defaults(handler=_render)

    convert_parser = commands.add_parser(
        "convert", help="turn Kubeflow TFJob manifests into DistTrainJobs, with comments on what changes"
    )
    convert_parser.add_argument("file", help="manifest file (several documents, or a List), or - for standard input")
    convert_parser.set_defaults(handler=_convert)

    crd_parser = commands.add_parser("crd", help="generate the CRD from the models, or check it did not drift")
    crd_parser.add_argument("action", choices=["generate", "check"])
    crd_parser.add_argument("--dir", default="crds", help="folder of the CRD file (default: crds)")
    crd_parser.set_defaults(handler=_crd)

    local_parser = commands.add_parser("local", help="run a job on this machine, without Kubernetes")
    local_commands = local_parser.add_subparsers(dest="local_command", required=True)
    local_run_parser = local_commands.add_parser(
        "run", help="run every replica as a local process with TF_CONFIG on localhost; exits with the job's outcome"
    )
    local_run_parser.add_argument("file", help="DistTrainJob manifest, or - for standard input")
    local_run_parser.add_argument("--workdir", help="where checkpoints go (DIR/checkpoints); default ./disttrain-<job>")
    local_run_parser.set_defaults(handler=_local_run)

    for plugin in entry_points(group=COMMAND_PLUGINS):  # `dev-cluster`, where disttrain-dev is installed
        plugin.load()(commands)
    commands.add_parser("jobs", help="list, describe and read the logs of jobs (also `kubectl disttrain`)")
    commands.add_parser(
        "operator",
        help="run the operator (kopf with disttrain's handlers); `disttrain operator --help` lists its options",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["operator"]:
        if find_spec("kopf") is None:
            print(
                "error: `disttrain operator` needs the operator's extra: pip install 'disttrain[operator]'",
                file=sys.stderr,
            )
            return 1
        from disttrain_operator.cli.operator_command import run_operator  # noqa: PLC0415

        return run_operator(argv[1:])
    if argv[:1] == ["jobs"]:
        from disttrain_operator.cli import jobs  # noqa: PLC0415

        return jobs.run(argv[1:])
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
