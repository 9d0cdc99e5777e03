"""The `disttrain` command: one entry point for users, CI and the operator image.

A click group whose subcommands are imported only when run (or listed by `--help`): `disttrain render`
does not pay for the API client, `disttrain jobs` not for kopf. Other distributions add subcommands
through the `disttrain.commands` entry points (`dev-cluster`, where disttrain-dev is installed).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib import import_module
from importlib.metadata import entry_points

import click

COMMAND_PLUGINS = "disttrain.commands"
COMPLETE_VARIABLE = "_DISTTRAIN_COMPLETE"

# name -> "module:attribute" of a click command
_COMMANDS = {
    "render": "disttrain_cli.manifests:render_command",
    "convert": "disttrain_cli.manifests:convert_command",
    "crd": "disttrain_cli.manifests:crd_command",
    "local": "disttrain_cli.manifests:local_group",
    "jobs": "disttrain_cli.jobs:jobs",
    "dashboard": "disttrain_cli.dashboard_command:dashboard_command",
    "operator": "disttrain_cli.operator_command:operator_command",
    "completion": "disttrain_cli.completion:completion_command",
}


def _load(target: str) -> click.Command:
    module, attribute = target.split(":")
    command = getattr(import_module(module), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


class _LazyGroup(click.Group):
    """Subcommands by name, imported when asked for; the plugins' from their entry points."""

    def _targets(self) -> dict[str, str]:
        plugins = {plugin.name: plugin.value for plugin in entry_points(group=COMMAND_PLUGINS)}
        return {**_COMMANDS, **plugins}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._targets())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self._targets().get(cmd_name)
        return None if target is None else _load(target)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def disttrain() -> None:
    """Distributed TensorFlow training on Kubernetes."""


def invoke(command: click.Command, argv: Sequence[str] | None, prog_name: str) -> int:
    """Run a click command; its exit status, as a number (click's own errors keep their codes)."""
    try:
        result = command.main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name=prog_name,
            complete_var=COMPLETE_VARIABLE,
            standalone_mode=False,
        )
    except click.exceptions.Exit as stop:
        return stop.exit_code
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        return 130
    return result if isinstance(result, int) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return invoke(disttrain, argv, "disttrain")


if __name__ == "__main__":
    sys.exit(main())
