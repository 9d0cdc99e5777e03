"""The Evaluator's last word, read by the operator: when the chief (or worker 0) has finished, the
Evaluator scores the final checkpoint and ends, writing its scores to its termination message
(`TERMINATION_MESSAGE_ENV`, as progress reports are) under `EVALUATION_FIELD`:

    {"evaluation": {"checkpoint": "/checkpoints/ckpt-660", "step": 660, "metrics": {"accuracy": 0.96},
                    "final": true}}

`final` says the checkpoint is the one training ended with. The operator waits for this (up to the
job's `runPolicy.finalEvaluationSeconds`) before it calls the job Succeeded and stops the Evaluator.
"""

from __future__ import annotations

EVALUATION_FIELD = "evaluation"
DEFAULT_FINAL_EVALUATION_SECONDS = 600
