"""`disttrain dev-cluster up|down|kubeconfig|load|namespace|operator`: added to `disttrain` where this package
is installed."""

from __future__ import annotations

import subprocess

import click

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES, pinned_release


def _release(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """A supported release, from `1.35`, `v1.35` or `v1.35.4`; anything else is refused before any build."""
    if value is None:
        return None
    try:
        return pinned_release(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@click.command("dev-cluster")
@click.argument("action", type=click.Choice(["up", "down", "kubeconfig", "load", "namespace", "operator"]))
@click.argument("names", nargs=-1)
@click.option(
    "--process-node",
    is_flag=True,
    help="with up: add a node whose pods run as real processes (needs root), and the namespace `local` for it",
)
@click.option(
    "--real-node",
    is_flag=True,
    help="with up: add a kubelet and containerd node, CoreDNS, kube-proxy, local-path volumes (root, Docker)",
)
@click.option(
    "--node",
    type=click.Choice(["process", "real"]),
    default=None,
    envvar="DISTTRAIN_DEV_NODE",
    help="with namespace: the node that the namespaces' pods run on [default: the real node where it runs, "
    "else the process node]",
)
@click.option(
    "--name",
    default=None,
    help="with up, down and kubeconfig: a second control plane of this name beside the local cluster (MultiKueue)",
)
@click.option(
    "--kubernetes",
    metavar="VERSION",
    default=None,
    callback=_release,
    help=f"with up: the Kubernetes release to build and run, one of {', '.join(SUPPORTED_KUBERNETES)} "
    f"(or its minor, `1.35`) [default: {KUBERNETES_VERSION}]",
)
def dev_cluster(
    action: str,
    names: tuple[str, ...],
    *,
    process_node: bool,
    real_node: bool,
    node: str | None,
    name: str | None,
    kubernetes: str | None,
) -> int:
    """A local control plane with fake GPU nodes, built from Go modules (development, CI).

    NAMES: with load, Docker images to copy into the real node; with namespace, namespaces to create.
    `operator` runs `disttrain operator` for every namespace in the background, until `down`, for jobs on the
    process node (on the real node, install it in the cluster: overlays/local-images).
    """
    from disttrain_dev import cluster  # noqa: PLC0415 - `disttrain --help` need not import the cluster

    try:
        if action == "up":
            click.echo(cluster.up(process_node=process_node, real_node=real_node, name=name, kubernetes=kubernetes))
        elif action == "down":
            cluster.down(name)
        elif action == "load":
            cluster.load_images(list(names))
        elif action == "namespace":
            kind = cluster.apply_namespaces(list(names), node)
            click.echo(f"{', '.join(names)}: pods run on the {kind} node", err=True)
        elif action == "operator":
            click.echo(cluster.start_operator(), err=True)
        elif cluster.running_state(cluster.state_dir(name)) is None:
            named = "" if name is None else f" --name {name}"
            raise RuntimeError(f"no such control plane is running; start one with `disttrain dev-cluster up{named}`")
        else:
            click.echo(cluster.kubeconfig_path(cluster.state_dir(name)))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
        click.echo(f"error: {error}", err=True)
        return 1
    return 0
