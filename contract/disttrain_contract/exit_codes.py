"""The trainer's exit codes: one table, read by the trainer and by the operator's ExitCode policy.

| code | name            | meaning                                                        | retry? |
|------|-----------------|----------------------------------------------------------------|--------|
| 0    | SUCCESS         | training finished                                              | -      |
| 1    | INTERNAL_ERROR  | an unexpected error in the trainer or the user's code          | no     |
| 2    | BAD_FLAGS       | a flag or environment value is missing or malformed            | no     |
| 3    | BAD_TF_CONFIG   | TF_CONFIG is not valid JSON or does not describe this task     | no     |
| 4    | DATA_NOT_FOUND  | the data path does not exist or holds no usable file           | no     |
| 5    | DIVERGED        | the loss turned NaN or infinite, and the termination message says so | no  |
| 130  | PEER_LOST       | a peer of the cluster stopped answering (restart and resume)   | yes    |
| 140  | PREEMPTED       | SIGTERM: saved first, then left; a disruption, not a failure    | yes    |
| 143  | TERMINATED      | SIGTERM's default action: ended unsaved (not the trainer's)    | yes    |

Codes 1-127 are permanent and >= 128 retryable, as the ExitCode restart policy reads them; a pod with
no exit code (deleted, evicted, lost with its node) counts as retryable too. 5 fails the job at once only
with the word `disttrain_contract.divergence` writes in the termination message; without it, 5 is a code
like any other below 128. This module imports nothing heavy so that the operator can share it.
"""

from __future__ import annotations

from enum import IntEnum

RETRYABLE_FROM = 128


class ExitCode(IntEnum):
    SUCCESS = 0
    INTERNAL_ERROR = 1
    BAD_FLAGS = 2
    BAD_TF_CONFIG = 3
    DATA_NOT_FOUND = 4
    DIVERGED = 5  # with the termination message's word (`divergence`), the job fails at once as Diverged
    PEER_LOST = 130
    PREEMPTED = 140  # 128 + SIGUSR2, a signal neither TensorFlow nor the trainer uses
    TERMINATED = 143


def is_retryable(code: int | None) -> bool:
    """A failure worth a restart: no exit code at all, or one of 128 and above."""
    return code is None or code >= RETRYABLE_FROM


class TrainerError(Exception):
    """An error the trainer reports in one line and exits on with its code."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
