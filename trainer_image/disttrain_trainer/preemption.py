"""Leaving on a termination signal without losing work: the training roles save first, together.

A SIGTERM (an eviction, a drain, a preemption, a suspend, the operator restarting the job) only sets
`STOP`; each role then leaves at a point where nothing is lost, with the contract's PREEMPTED code:

- MultiWorkerMirrored: a checkpoint save is a collective, so one worker cannot save alone. The first
  signalled worker names the step after its own through the coordination service and waits until
  every worker has read it. Every step ends in an all-reduce, so no worker is past the step it is on,
  and the named step is ahead of them all: each saves when it gets there, then exits.
- A lone process (Mirrored, the default strategy, ParameterServer's chief) saves at its next step.
- ParameterServer's servers hold the variables the chief saves, and a worker runs the steps the chief
  waits for, so a signalled server goes on serving until the chief has gone (or `linger` runs out).

TensorFlow's `PreemptionCheckpointHandler` does the MultiWorkerMirrored part, but not everywhere a
job runs: docs/architecture.md says why this module does it instead.
"""

from __future__ import annotations

import contextlib
import threading
import time

import tensorflow as tf
from tensorflow.python.eager import context

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.peers import Answer, probe

STOP = threading.Event()  # set by SIGTERM (main.py)

_STEP_KEY = "disttrain/preemption/step"
_SERVICE_GONE = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError)
_READ_KEY = "disttrain/preemption/read/{}"


class SaveTogether:
    """Says, at each step boundary, whether this worker saves now and leaves."""

    def __init__(self, workers: tuple[str, ...] = (), own: str = "") -> None:
        """`workers`: the names of every worker that saves together (none: this process saves alone)."""
        self.workers, self._own = workers, own
        self._named: int | None = None
        self._announced = False
        if len(workers) > 1:
            threading.Thread(target=self._watch, name="preemption-watch", daemon=True).start()

    def _watch(self) -> None:
        """Waits (in the coordination service) for a worker to name the step, then says it was read. The service
        ends with the worker that holds it (worker 0 at the end of every run, or a lost peer, which the next
        collective reports): nothing is named then."""
        try:
            self._named = int(context.context().get_config_key_value(_STEP_KEY))
            context.context().set_config_key_value(_READ_KEY.format(self._own), "1")
        except _SERVICE_GONE:
            return

    def save_now(self, step: int) -> bool:
        if len(self.workers) <= 1:
            return STOP.is_set()
        if STOP.is_set() and not self._announced:
            self._announced = True
            with contextlib.suppress(tf.errors.AlreadyExistsError):  # another worker was signalled first
                context.context().set_config_key_value(_STEP_KEY, str(step + 1))
            for worker in self.workers:  # before the next step: no worker can pass the named one
                context.context().get_config_key_value(_READ_KEY.format(worker))
        return self._named is not None and step >= self._named

    def leave(self, step: int) -> TrainerError:
        saved = "every worker saved" if len(self.workers) > 1 else "saved"
        return TrainerError(ExitCode.PREEMPTED, f"preempted: {saved} at step {step}")


def linger_while(address: str | None, linger: float, poll: float = 0.2) -> None:
    """Once signalled: serve on while `address` (the chief) accepts connections, for at most `linger` seconds."""
    deadline = time.monotonic() + linger
    while address is not None and time.monotonic() < deadline and probe(address, timeout=1.0) is Answer.ACCEPTS:
        time.sleep(poll)
