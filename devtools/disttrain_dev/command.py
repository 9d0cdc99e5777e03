"""`disttrain dev-cluster up|down|kubeconfig|load|namespace`: added to `disttrain` where this package is installed."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """The entry point `disttrain.commands`: `disttrain` calls it with its subcommands."""
    parser = commands.add_parser(
        "dev-cluster", help="a local control plane with fake GPU nodes, built from Go modules (development, CI)"
    )
    parser.add_argument("action", choices=["up", "down", "kubeconfig", "load", "namespace"])
    parser.add_argument(
        "names", nargs="*", help="load: Docker images to copy into the real node; namespace: namespaces to create"
    )
    parser.add_argument(
        "--process-node",
        action="store_true",
        help="with up: add a node whose pods run as real processes (needs root), and the namespace `local` for it",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="with up: add a kubelet and containerd node, CoreDNS, kube-proxy, local-path volumes (root, Docker)",
    )
    parser.add_argument(
        "--node",
        choices=["process", "real"],
        default="real",
        help="with namespace: the node that the namespaces' pods run on (default: real)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from disttrain_dev import cluster  # noqa: PLC0415 - `disttrain --help` need not import the cluster

    try:
        if args.action == "up":
            print(cluster.up(process_node=args.process_node, real_node=args.real_node))
        elif args.action == "down":
            cluster.down()
        elif args.action == "load":
            cluster.load_images(args.names)
        elif args.action == "namespace":
            cluster.apply_namespaces(args.names, args.node)
        elif cluster.running_state() is None:
            raise RuntimeError("no local cluster is running; start one with `disttrain dev-cluster up`")
        else:
            print(cluster.kubeconfig_path())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
