"""`disttrain.local.train` with real TensorFlow: a function's workers join one collective; a package from a
local index is there when the function runs; a function that raises, and a package that does not install,
end the job with their words; a Keras `fit` reports its steps unasked and stops at a NaN loss."""

from __future__ import annotations

import io
import json
from pathlib import Path

import disttrain.local
from disttrain_contract.exit_codes import ExitCode
from support.package_index import package_index
from support.shipped_functions import (
    fails,
    fits_until_nan,
    greets,
    kubeflow_v1_style,
    nothing,
    reduce_across_workers,
    reports,
)


def test_two_workers_of_a_function_join_one_collective(tmp_path: Path) -> None:
    outcome = disttrain.local.train(
        reduce_across_workers, workers=2, parameters={"value": 1.5}, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == 0, outcome.logs
    # worker 0 decides, as under the operator: worker 1 ends on its own (0) or is stopped by the run's end (None)
    assert outcome.exit_codes["worker-0"] == 0 and outcome.exit_codes["worker-1"] in (0, None), outcome.exit_codes
    joined = [{"workers": 2, "sum": 3.0}]  # each worker's 1.5 in one all-reduce
    assert reports(outcome.logs["worker-0"]) == joined, outcome.logs["worker-0"][-2000:]
    if outcome.exit_codes["worker-1"] == 0:
        assert reports(outcome.logs["worker-1"]) == joined, outcome.logs["worker-1"][-2000:]


def test_a_function_that_raises_ends_the_job_with_its_words(tmp_path: Path) -> None:
    outcome = disttrain.local.train(fails, workers=1, parameters={"rate": 7.0}, workdir=tmp_path, out=io.StringIO())
    assert outcome.code == ExitCode.INTERNAL_ERROR
    message = (tmp_path / "worker-0.termination-message").read_text()
    assert "ValueError: rate 7.0 is out of range" in message


def test_a_keras_fit_reports_its_steps_unasked_and_stops_where_its_loss_turns_nan(tmp_path: Path) -> None:
    """A function that takes no `progress`: each `fit` reports through the trainer's contract anyway, and a NaN
    loss ends every worker as the trainer's own divergence does (exit code 5, and the word the operator needs)."""
    outcome = disttrain.local.train(
        fits_until_nan, workers=2, parameters={"nan_from": 6}, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == ExitCode.DIVERGED, outcome.logs
    record = json.loads((tmp_path / "worker-0.termination-message").read_text())
    assert record["diverged"] is True and "at step 7" in record["error"], record
    assert record["step"] == 7 and record["loss"] is None  # the report of the step it stopped at
    steps = [json.loads(line)["step"] for line in outcome.logs["worker-0"].splitlines() if '"progress"' in line]
    assert steps[:1] == [5], outcome.logs["worker-0"][-2000:]  # reported every 5 steps, unasked
    assert outcome.exit_codes["worker-1"] in (ExitCode.DIVERGED, None), outcome.exit_codes


def test_a_function_written_for_kubeflows_v1_sdk_gets_its_parameters_as_one_dict(tmp_path: Path) -> None:
    outcome = disttrain.local.train(
        kubeflow_v1_style, workers=1, parameters={"epochs": 3, "lr": 0.5}, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == 0, outcome.logs
    assert '{"given": {"epochs": 3, "lr": 0.5}}' in outcome.logs["worker-0"]


def test_a_package_from_the_index_is_installed_before_the_function_runs(tmp_path: Path) -> None:
    index = package_index(tmp_path / "index", "tiny-greeting", "1.0", "tiny_greeting", "GREETING = 'hello'\n")
    outcome = disttrain.local.train(
        greets, workers=1, packages=["tiny-greeting==1.0"], index_url=index, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == 0, outcome.logs
    assert "greeting hello" in outcome.logs["worker-0"]


def test_a_package_that_does_not_install_ends_the_job_with_pip_s_words(tmp_path: Path) -> None:
    index = package_index(tmp_path / "index", "tiny-greeting", "1.0", "tiny_greeting", "")
    outcome = disttrain.local.train(
        nothing, workers=1, packages=["no-such-package==1.0"], index_url=index, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == ExitCode.BAD_FLAGS
    message = (tmp_path / "worker-0.termination-message").read_text()
    assert "pip could not install no-such-package==1.0" in message
