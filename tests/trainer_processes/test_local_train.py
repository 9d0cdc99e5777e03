"""`disttrain.local.train` with real TensorFlow: a function's workers join one collective; a function that
raises, and a package that does not install, end the job with their words."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import disttrain.local
from disttrain_contract.exit_codes import ExitCode


def reduce_across_workers(strategy: Any, value: float) -> None:
    import json  # noqa: PLC0415 - a shipped function imports what it uses

    import tensorflow as tf  # noqa: PLC0415

    context = tf.distribute.get_replica_context
    total = strategy.run(lambda: context().all_reduce("SUM", tf.constant(value)))
    reduced = strategy.experimental_local_results(total)[0]
    print(json.dumps({"workers": strategy.num_replicas_in_sync, "sum": float(reduced)}), flush=True)


def _reports(log: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if line.startswith('{"workers"')]


def test_two_workers_of_a_function_join_one_collective(tmp_path: Path) -> None:
    outcome = disttrain.local.train(
        reduce_across_workers, workers=2, parameters={"value": 1.5}, workdir=tmp_path, out=io.StringIO()
    )
    assert outcome.code == 0, outcome.logs
    assert outcome.exit_codes == {"worker-0": 0, "worker-1": 0}
    for label in ("worker-0", "worker-1"):
        assert _reports(outcome.logs[label]) == [{"workers": 2, "sum": 3.0}], outcome.logs[label][-2000:]


def fails(rate: float) -> None:
    raise ValueError(f"rate {rate} is out of range")


def test_a_function_that_raises_ends_the_job_with_its_words(tmp_path: Path) -> None:
    outcome = disttrain.local.train(fails, workers=1, parameters={"rate": 7.0}, workdir=tmp_path, out=io.StringIO())
    assert outcome.code == ExitCode.INTERNAL_ERROR
    message = (tmp_path / "worker-0.termination-message").read_text()
    assert "ValueError: rate 7.0 is out of range" in message


def nothing() -> None:
    pass


def test_a_package_that_does_not_install_ends_the_job_with_pip_s_words(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()  # an empty local index: nothing is found there
    outcome = disttrain.local.train(
        nothing, workers=1, packages=["no-such-package==1.0"], index_url=index.as_uri(), workdir=tmp_path,
        out=io.StringIO(),
    )  # fmt: skip
    assert outcome.code == ExitCode.BAD_FLAGS
    message = (tmp_path / "worker-0.termination-message").read_text()
    assert "pip could not install no-such-package==1.0" in message
