"""What the operator remembers of one job between its reconciles."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from disttrain_core.restarts.in_place import pod_uid
from disttrain_core.served import JobShape
from disttrain_core.types import ObjectRef, Verdict
from disttrain_operator.expectations import Expectations


@dataclass
class JobMemory:
    """Dropped with the job (`Reconciler.forget`)."""

    written: dict[str, Any] | None = None  # the status last written
    unwritten: dict[str, Any] | None = None  # a status held back for the batch
    last_write: datetime | None = None  # when the status was last written
    making_way_until: datetime | None = None  # a restart's status waits for its replacements until then
    settled: tuple[Any, ...] | None = None  # what the job looked like after its last reconcile
    phase: tuple[str, str] | None = None  # namespace and phase, for the active gauge
    # the uids of pods, and the keys of runs ended in place (`run_key`), acted on: restarted for, or deleted
    handled: set[str] = field(default_factory=set)
    forced: set[str] = field(default_factory=set)  # uids of pods removed by force (one Event each)
    unwatched: set[ObjectRef] = field(default_factory=set)  # children known to exist that no watch sees
    unwatched_since: datetime | None = None  # when one of them was last created (or found there)
    expected: Expectations = field(default_factory=Expectations)  # done, not yet seen by a watch
    checked_generation: int | None = None  # the last generation whose spec passed the CRD's schema
    tensorboard_refused: tuple[int | None, Verdict] | None = None  # the generation whose TensorBoard was refused
    shape: JobShape = field(default_factory=JobShape)  # how the job is read and written (a served TFJob's shape)
    left_to: str | None = None  # the other manager the job names, once the log said so

    def forget_pods_beyond(self, present: AbstractSet[str]) -> None:
        """Forget what was acted on of pods no longer in the job's view, their remains gone too: a uid never
        comes back, so what is remembered of a job restarted at any rate stays as large as its pods and runs."""
        self.handled = {key for key in self.handled if pod_uid(key) in present}
        self.forced &= present

    def tensorboard_refusal(self, generation: int | None) -> tuple[int | None, Verdict] | None:
        """The TensorBoard refusal that still holds: a new spec may be accepted, so another generation's is dropped."""
        if self.tensorboard_refused is not None and self.tensorboard_refused[0] != generation:
            self.tensorboard_refused = None
        return self.tensorboard_refused
