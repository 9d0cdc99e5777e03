"""A loss that turned NaN or infinite: the trainer stops there, with the exit code DIVERGED.

The operator fails the job at once with reason Diverged (a restart from the same checkpoint would
diverge again) and quotes the message, which names the step and the last finite checkpoint. A user's
own image does the same with `report_divergence`:

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
        add_error(Path(path), message)
    return int(ExitCode.DIVERGED)
