"""`disttrain dashboard`: serve the read-only web view (uvicorn) with the viewer's kubeconfig, or in a
cluster to each viewer as themselves (`--authenticate`)."""

from __future__ import annotations

import ipaddress
import socket
import sys
from importlib.util import find_spec

import click


@click.command("dashboard")
@click.option("--port", type=int, default=8080, show_default=True, help="0 picks a free port")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="0.0.0.0 serves every interface (in a pod); any but loopback needs --authenticate",
)
@click.option("-n", "--namespace", help="show this namespace only (for a viewer who may not list every one)")
@click.option("--context", help="the kubeconfig context (default: its current one)")
@click.option("--kubeconfig", help="default: KUBECONFIG, else ~/.kube/config, else in-cluster")
@click.option(
    "--authenticate",
    is_flag=True,
    help="each viewer signs in with a bearer token and sees what their own RBAC allows (for a shared install)",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    help="a Host a request may name besides localhost and 127.0.0.1 (the Service's DNS names); * allows any",
)
def dashboard_command(
    *,
    port: int,
    host: str,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    authenticate: bool,
    allowed_hosts: tuple[str, ...],
) -> int:
    """A read-only web view of every job: phase, replicas, restarts, progress, curves, logs, Events.

    Prints the address it serves on; Ctrl-C stops it.
    """
    if not authenticate and not is_loopback(host):
        click.echo(
            f"error: --host {host} serves other machines, and without --authenticate every one of them would read"
            " with your kubeconfig's rights: add --authenticate (each viewer signs in with a token), or serve"
            " 127.0.0.1 and reach it through an SSH tunnel or `kubectl port-forward`",
            err=True,
        )
        return 2
    if find_spec("starlette") is None or find_spec("uvicorn") is None:
        click.echo(
            "error: `disttrain dashboard` needs its extra: pip install -e ./contract -e '.[dashboard]' in a checkout",
            err=True,
        )
        return 1
    import uvicorn  # noqa: PLC0415

    from disttrain import Client, DisttrainError  # noqa: PLC0415
    from disttrain_dashboard.app import LOCAL_HOSTS, create_app  # noqa: PLC0415

    try:
        client = Client(kubeconfig=kubeconfig, context=context)
    except DisttrainError as error:
        click.echo(f"error: {error}", err=True)
        return 1
    listener = socket.create_server((host, port))
    bound = listener.getsockname()[1]
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    click.echo(f"http://{shown_host}:{bound}/")
    sys.stdout.flush()
    viewers = "each viewer as themselves" if authenticate else "your kubeconfig's rights"
    shown = f"namespace {namespace}" if namespace else "every namespace"
    click.echo(f"dashboard of {shown}, with {viewers}; Ctrl-C stops", err=True)
    app = create_app(client, namespace, authenticate=authenticate, allowed_hosts=(*LOCAL_HOSTS, *allowed_hosts))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[listener])
    return 0


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback alone."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
