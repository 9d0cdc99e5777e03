"""`disttrain.local.train(function, workers=2, ...)`: the function `Client.train` would run on the cluster, run
here first, as local processes with TF_CONFIG (`disttrain local run`): the same job, the same runner, the
same refusals, so a function can be debugged before it spends cluster time. Needs the trainer installed
(`pip install -e ./contract -e './trainer_image[tensorflow]'`)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from disttrain.local.run import LocalOutcome, run
from disttrain.shipped_function import ship
from disttrain.train_job import FUNCTION_MOUNT, train_objects
from disttrain_contract.shipped_call import PACKAGES_DIR_ENV
from disttrain_core.api.job import DistTrainJob


def train(
    function: Callable[..., Any],
    *,
    workers: object = 2,
    ps: object = 0,
    chief: object | None = None,
    evaluator: object = 0,
    strategy: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    packages: list[str] | tuple[str, ...] | None = None,
    index_url: str | None = None,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    out: IO[str] = sys.stdout,
) -> LocalOutcome:
    """Run `function` in every replica as a local process; the outcome holds each one's exit code and log."""
    job, function_map = train_objects(
        ship(function),
        namespace="local",
        workers=workers,
        ps=ps,
        chief=chief,
        evaluator=evaluator,
        strategy=strategy,
        parameters=parameters,
        packages=packages,
        index_url=index_url,
        env=env,
        checkpoint={"size": "1Gi"},
    )
    folder = workdir or Path(tempfile.mkdtemp(prefix=f"disttrain-{job.metadata.name}-"))
    shipped = folder / "function"
    shipped.mkdir(parents=True, exist_ok=True)
    for key, text in function_map["data"].items():
        (shipped / key).write_text(text)
    return run(_reading_from(job, shipped), folder, out, env={PACKAGES_DIR_ENV: str(folder / "packages")})


def _reading_from(job: DistTrainJob, shipped: Path) -> DistTrainJob:
    """The job with each runner pointed at the function's folder here instead of its ConfigMap's mount."""
    manifest = job.model_dump(mode="json", by_alias=True, exclude_none=True)
    for spec in manifest["spec"]["replicaSpecs"].values():
        for container in spec["template"]["spec"]["containers"]:
            container["command"] = [str(shipped) if part == FUNCTION_MOUNT else part for part in container["command"]]
    return DistTrainJob.model_validate(manifest)
