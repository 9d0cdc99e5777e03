"""Shell completion: `disttrain completion bash|zsh|fish` prints the script to source, and
`kubectl_complete-disttrain` answers kubectl, which asks it when completing `kubectl disttrain ...`.

Both come from click's own completion; job names and namespaces are read from the cluster.
"""

from __future__ import annotations

import sys

import click
from click.shell_completion import ShellComplete, get_completion_class

from disttrain_cli.main import COMPLETE_VARIABLE, disttrain

SHELLS = ("bash", "zsh", "fish")
NO_FILE_COMPLETION = 4  # cobra's ShellCompDirectiveNoFileComp, the directive kubectl reads on the last line


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> int:
    """Print the shell's completion script: `source <(disttrain completion bash)`."""
    completer = get_completion_class(shell)
    assert completer is not None  # every name in SHELLS has a class in click
    click.echo(completer(disttrain, {}, "disttrain", COMPLETE_VARIABLE).source())
    return 0


def kubectl_completions(words: list[str]) -> list[str]:
    """What `kubectl disttrain WORDS...` may go on with; the last word is the one being typed."""
    from disttrain_cli.jobs import jobs  # noqa: PLC0415

    *given, incomplete = words or [""]
    found = ShellComplete(jobs, {}, "kubectl disttrain", COMPLETE_VARIABLE).get_completions(given, incomplete)
    return [item.value for item in found]


def kubectl_complete() -> None:
    """`kubectl_complete-disttrain`: one completion a line, then cobra's directive, as kubectl expects."""
    for value in kubectl_completions(sys.argv[1:]):
        print(value)
    print(f":{NO_FILE_COMPLETION}")
