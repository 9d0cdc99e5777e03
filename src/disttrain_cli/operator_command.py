"""`disttrain operator`: its command line, the wait for the Lease where several replicas run, and kopf
started with the operator's handlers (`runtime.handlers`) and the settings read here once."""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import Sequence
from importlib.util import find_spec
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from types import FrameType

    from disttrain_operator.leader_election import LeaderElector, Timing
    from disttrain_operator.operator_settings import OperatorSettings

LOG_FORMATS = ("plain", "full", "json")  # kopf.LogFormat by name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="disttrain operator", description="Run the disttrain operator.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-n",
        "--namespace",
        dest="namespaces",
        metavar="NAMESPACE",
        action="append",
        default=[],
        help="watch this namespace; repeatable, and a glob (team-*, !team-x) watches those that match",
    )
    where.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace (the default)")
    parser.add_argument("-L", "--liveness", default="http://0.0.0.0:8080/healthz", help="kopf's liveness endpoint")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG")
    parser.add_argument("-d", "--debug", action="store_true", help="log at DEBUG")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="full")
    parser.add_argument("--serve-tfjobs", action="store_true", help="also serve Kubeflow's TFJobs (kubeflow.org/v1)")
    parser.add_argument(
        "--adopt-tfjobs", action="store_true", help="serve TFJobs even though their CRD is not disttrain's"
    )
    parser.add_argument("--leader-elect", action="store_true", help="act only while holding the Lease")
    parser.add_argument("--lease-namespace", help="default: POD_NAMESPACE, else the ServiceAccount's namespace")
    parser.add_argument("--lease-seconds", type=float, default=15.0)
    parser.add_argument("--renew-seconds", type=float, default=10.0)
    parser.add_argument("--retry-seconds", type=float, default=2.0)
    return parser


def read_settings(args: argparse.Namespace) -> OperatorSettings:
    """The environment's settings, with what the command line says of namespaces and TFJobs; a bad
    variable is named here, before the Lease or kopf."""
    from disttrain_operator.operator_settings import OperatorSettings, SettingsError  # noqa: PLC0415

    try:
        settings = OperatorSettings.from_environment()
    except SettingsError as error:
        raise SystemExit(f"error: the operator's environment: {error}") from None
    return settings.model_copy(
        update={
            "watch_namespaces": tuple(args.namespaces),
            "serve_tfjobs": args.serve_tfjobs or settings.serve_tfjobs,
        }
    )


@click.command(
    "operator",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def operator_command(arguments: tuple[str, ...]) -> int:
    """Run the operator (kopf with disttrain's handlers); `disttrain operator --help` lists its options."""
    if find_spec("kopf") is None:
        click.echo(
            "error: `disttrain operator` needs the operator's extra: "
            "pip install -e ./contract -e '.[operator]' in a checkout",
            err=True,
        )
        return 1
    return run_operator(arguments)


def run_operator(argv: Sequence[str]) -> int:
    """kopf with the operator's handlers, standalone, on every namespace unless told otherwise.

    With `--leader-elect`, several replicas may run: each waits (answering its liveness probe) until
    it holds the Lease, and only then starts kopf, so exactly one acts.
    """
    import kopf  # noqa: PLC0415 - only the operator pays for importing kopf

    from disttrain_operator import handlers  # noqa: PLC0415

    parser = build_parser()
    args = parser.parse_args(argv)
    timing = _timing(args, parser) if args.leader_elect else None  # a wrong argument says so before anything
    settings = read_settings(args)
    _serve_metrics(settings.metrics_port)
    kopf.configure(
        verbose=args.verbose,
        debug=args.debug,
        quiet=args.quiet,
        log_format=kopf.LogFormat[args.log_format.upper()],
    )
    if not (args.verbose or args.debug):
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)  # else a line for each event of a job
    logging.getLogger(__name__).info("metrics on port %d", settings.metrics_port)
    if settings.serve_tfjobs:
        _check_tfjob_ownership(adopt=args.adopt_tfjobs)
        handlers.serve_tfjobs()
    elector = _lead(args, timing) if timing is not None else None
    try:
        kopf.run(
            standalone=True,
            clusterwide=not args.namespaces,
            namespaces=args.namespaces,
            liveness_endpoint=args.liveness,
            memo=kopf.Memo({handlers.SETTINGS: settings}),
        )
    finally:
        if elector is not None:
            elector.release()
    return 0


def _serve_metrics(port: int) -> None:
    """Serve /metrics before the Lease and kopf. A port that is taken stops the operator here, with the
    reason: in kopf's start-up it would be tried again every minute, the liveness probe failing meanwhile."""
    from disttrain_operator import metrics  # noqa: PLC0415

    try:
        metrics.serve(port)
    except OSError as error:
        reason = f"error: cannot serve metrics on port {port} (DISTTRAIN_METRICS_PORT): {error.strerror}"
        raise SystemExit(reason) from None


def _check_tfjob_ownership(adopt: bool) -> None:
    """Exit with the reason when another controller owns TFJobs here (see `tfjob_ownership`)."""
    from disttrain_kube.connection import connect  # noqa: PLC0415
    from disttrain_kube.rest import Kube  # noqa: PLC0415
    from disttrain_operator import tfjob_ownership  # noqa: PLC0415

    definition = Kube(connect(in_cluster_first=True).api_client).read(
        tfjob_ownership.CRD_PATH, {"name": tfjob_ownership.CRD_NAME}
    )
    problem = tfjob_ownership.refusal(definition, adopt)
    if problem:
        raise SystemExit(f"error: not serving TFJobs: {problem}")


def _timing(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Timing:
    from disttrain_operator.leader_election import Timing  # noqa: PLC0415

    try:
        return Timing(args.lease_seconds, args.renew_seconds, args.retry_seconds)
    except ValueError as error:
        parser.error(str(error))


def _lead(args: argparse.Namespace, timing: Timing) -> LeaderElector:
    """Wait for the Lease, answering the liveness probe meanwhile; kopf takes the probe's port over after."""
    from disttrain_kube.connection import connect  # noqa: PLC0415
    from disttrain_kube.rest import Kube  # noqa: PLC0415
    from disttrain_operator import leader_election, metrics  # noqa: PLC0415

    elector = leader_election.LeaderElector(
        Kube(connect(in_cluster_first=True, retries=0).api_client, on_error=metrics.count_api_error),
        args.lease_namespace or leader_election.default_namespace(),
        leader_election.default_identity(),
        timing=timing,
        on_lost=lambda: os._exit(1),  # stop acting at once; the Deployment starts a fresh candidate
    )
    # As a container's PID 1 the process ignores a signal it has no handler for, so a standby would wait out
    # its whole grace period when its pod is deleted (a rollout, a scale to 0, an uninstall); kopf sets its
    # own handler once this one leads.
    signal.signal(signal.SIGTERM, _stop_waiting)
    with leader_election.standby(args.liveness):
        elector.acquire()
    return elector


def _stop_waiting(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)
