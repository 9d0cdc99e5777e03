"""A container as a host process: its command line and environment, for `disttrain local run` and the
dev cluster's process node alike. Images are not pulled, so only what a process can have is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class UnsupportedContainerError(ValueError):
    """The container asks for what a host process cannot have; the message says what."""


def command_line(container: Mapping[str, Any]) -> tuple[str, ...]:
    """Command then args; a container without a command would need its image's entrypoint."""
    if not container.get("command"):
        raise UnsupportedContainerError(
            f"container {container.get('name')}: processes run commands, not images; set `command`"
        )
    return (*container["command"], *container.get("args", []))


def environment(container: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, str]:
    """Plain values, and `fieldRef`s among `fields` (field path to value); nothing from Secrets or ConfigMaps."""
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "valueFrom" not in entry:
            env[entry["name"]] = str(entry.get("value", ""))
            continue
        path = str((entry["valueFrom"].get("fieldRef") or {}).get("fieldPath"))
        if path not in fields:
            allowed = ", ".join(sorted(fields)) or "none"
            raise UnsupportedContainerError(f"env {entry['name']}: only values and fieldRefs ({allowed}) run here")
        env[entry["name"]] = fields[path]
    return env
