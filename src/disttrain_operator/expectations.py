"""What the operator created or deleted that its watches do not show yet: not to be done again.

A watch lags the operator's own writes by a few events; without this, every reconcile in that window
asked to create the same pods again (a 409 each) or to delete them again. client-go's controllers keep
the same "expectations"."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from disttrain_core.observed import PodView
from disttrain_core.types import ObjectRef

# How long the watches may take to show a child the operator created (or a pod it deleted) before the plan
# may ask for it again: the child may have gone before any reconcile saw it. A duplicate costs a 409.
EXPECTATION = timedelta(seconds=15)
Expected = ObjectRef | str  # a child created, or the uid of a pod deleted


@dataclass
class Expectations:
    """One job's: each thing done, and until when it is expected to show."""

    until: dict[Expected, datetime] = field(default_factory=dict)

    def expect(self, key: Expected, now: datetime) -> None:
        self.until[key] = now + EXPECTATION

    def pending(self, pods: Sequence[PodView], children: Collection[ObjectRef], now: datetime) -> set[Expected]:
        """What is still expected: each thing the watches now show, or that waited past its time, is dropped."""
        present = {ObjectRef("Pod", pod.name) for pod in pods} | set(children)
        undeleted = {pod.uid for pod in pods if not pod.deleting}

        def shown(key: Expected) -> bool:
            return key in present if isinstance(key, ObjectRef) else key not in undeleted

        for key in [key for key, until in self.until.items() if until < now or shown(key)]:
            del self.until[key]
        return set(self.until)
