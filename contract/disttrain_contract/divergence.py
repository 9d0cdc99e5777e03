"""A loss that turned NaN or infinite: the trainer stops there, with the exit code DIVERGED, and says so.

Exit code 5 alone is any program's to use, so the operator fails a job as Diverged only where the
container also wrote `DIVERGED_FIELD` (true) in its termination message file, the container's last
words that Kubernetes keeps: a restart from the same checkpoint would diverge again. It quotes the
message, which names the step and the last finite checkpoint. A 5 without that word follows the
replica's `restartPolicy`, as under TFJob. A user's own image says it with `report_divergence`:

    if not math.isfinite(loss):
        sys.exit(report_divergence(step, loss, manager.latest_checkpoint))
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from disttrain_contract.exit_codes import ExitCode
from disttrain_contract.progress import TERMINATION_MESSAGE_ENV, add_error

DIVERGED_FIELD = "diverged"  # in the termination message: true where the trainer stopped on a loss that is no number


def divergence_message(step: int, loss: float, last_checkpoint: str | None) -> str:
    kept = f"the last finite checkpoint is {last_checkpoint}" if last_checkpoint else "no checkpoint was saved before"
    return f"the loss became {loss} at step {step}: training stopped there; {kept}"


def report_divergence(
    step: int, loss: float, last_checkpoint: str | None = None, environ: Mapping[str, str] = os.environ
) -> int:
    """Say so on stderr and in the termination message; returns the exit code to leave with."""
    message = divergence_message(step, loss, last_checkpoint)
    print(f"error: {message}", file=sys.stderr, flush=True)
    path = environ.get(TERMINATION_MESSAGE_ENV)
    if path:
        add_error(Path(path), message, **{DIVERGED_FIELD: True})
    return int(ExitCode.DIVERGED)
