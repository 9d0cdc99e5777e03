"""The `disttrain` command: one entry point for users, CI and the operator image."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from disttrain_operator import crd
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.render import RenderError, render


def _read_input(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise RenderError(f"{source}: no such file")
    return path.read_text(encoding="utf-8")


def _render(args: argparse.Namespace) -> int:
    settings = BuildSettings(cluster_domain=args.cluster_domain)
    try:
        sys.stdout.write(render(_read_input(args.file), settings, namespace=args.namespace))
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
    print(f"{folder / crd.CRD_FILE} matches the models")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="disttrain", description="Distributed TensorFlow training on Kubernetes.")
    commands = parser.add_subparsers(dest="command", required=True)

    render_parser = commands.add_parser(
        "render", help="validate a DistTrainJob manifest and print every object the operator would create"
    )
    render_parser.add_argument("file", help="manifest file, or - for standard input")
    render_parser.add_argument("--namespace", help="namespace for manifests that name none (default: default)")
    render_parser.add_argument("--cluster-domain", help="append this domain to TF_CONFIG addresses")
    render_parser.set_defaults(handler=_render)

    crd_parser = commands.add_parser("crd", help="generate the CRD from the models, or check it did not drift")
    crd_parser.add_argument("action", choices=["generate", "check"])
    crd_parser.add_argument("--dir", default="crds", help="folder of the CRD file (default: crds)")
    crd_parser.set_defaults(handler=_crd)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
