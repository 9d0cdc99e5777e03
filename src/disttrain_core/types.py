"""Small types every layer above the API models passes around."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]  # a Kubernetes object as JSON, as the builders make it and the API takes it
Body = Mapping[str, Any]  # an object as the API server sent it, read only (a job as its watch keeps it)
JobKey = tuple[str, str]  # a job's namespace and name: what triggers name and the queue holds


@dataclass(frozen=True)
class ObjectRef:
    """A job's child by kind and name (a Pod, Service, PVC or PodGroup): to the planner, whether it exists."""

    kind: str
    name: str


@dataclass(frozen=True)
class Verdict:
    """Why a condition holds, for its reason and message."""

    reason: str
    message: str


def invalid_spec(problems: Sequence[str]) -> Verdict:
    """The verdict on a spec the operator cannot act on (the first five problems)."""
    return Verdict("InvalidSpec", f"the operator cannot act on this spec: {'; '.join(problems[:5])}")
