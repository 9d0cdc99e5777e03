"""`disttrain dev-cluster up|down|kubeconfig`: added to the `disttrain` command where this package is installed."""

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
    parser.add_argument("action", choices=["up", "down", "kubeconfig"])
    parser.add_argument(
        "--process-node",
        action="store_true",
        help="with up: add a node whose pods run as real processes (needs root), and the namespace `local` for it",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from disttrain_dev import cluster  # noqa: PLC0415 - `disttrain --help` need not import the cluster

    if args.action == "up":
        try:
            print(cluster.up(process_node=args.process_node))
        except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    elif args.action == "down":
        cluster.down()
    else:
        path = cluster.kubeconfig_path()
        if cluster.running_state() is None:
            print("error: no local cluster is running; start one with `disttrain dev-cluster up`", file=sys.stderr)
            return 1
        print(path)
    return 0
