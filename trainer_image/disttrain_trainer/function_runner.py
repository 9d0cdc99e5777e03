"""`disttrain-run-function FOLDER`: run a function that `Client.train` or `disttrain.local.train` shipped.

FOLDER holds `function.py` (the function's source, `disttrain.shipped_function`) and `call.json` (its name,
the keyword arguments, whether it takes the strategy, the packages to install first and their index). Each
replica installs the packages, then: a ParameterServer's ps and worker tasks serve the coordinator, as the
trainer's do; every other task calls the function with its arguments and, where it takes one, the
`tf.distribute` strategy TF_CONFIG describes and, where it takes `progress`, a Keras callback that reports
the job's steps and loss as the trainer does (`Client.wait(..., progress=True)` shows them); a function
that does not take it gets the same callback in every `fit` it calls. The callback stops the task at a
loss that is no number, as the trainer does (exit code DIVERGED, said in the termination message). A package
that fails to install, or a function that raises, ends the task with a permanent exit code and the reason
in its termination message, never a crash loop.
"""

from __future__ import annotations
import __future__

import json
import math
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disttrain_contract.divergence import divergence_message
from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_contract.shipped_call import CALL_FILE, FUNCTION_FILE, PACKAGES_DIR_ENV, RUN_FUNCTION_COMMAND
from disttrain_trainer.config import Role, parse_role
from disttrain_trainer.reporting import fail, log

MAX_CALL_BYTES = 512 * 1024
PIP_TAIL = 2000  # characters of pip's output kept in the termination message


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    takes_strategy: bool
    takes_progress: bool
    packages: tuple[str, ...]
    index_url: str | None


def read_call(folder: Path) -> tuple[str, Call]:
    """The function's source and how to call it, or BAD_FLAGS saying what is wrong with them."""
    try:
        raw = (folder / CALL_FILE).read_bytes()[: MAX_CALL_BYTES + 1]
        source = (folder / FUNCTION_FILE).read_text()
    except OSError as error:
        raise TrainerError(ExitCode.BAD_FLAGS, f"the shipped function is not in {folder}: {error}") from error
    if len(raw) > MAX_CALL_BYTES:
        raise TrainerError(ExitCode.BAD_FLAGS, f"{CALL_FILE} is over {MAX_CALL_BYTES} bytes")
    try:
        call = json.loads(raw)
        return source, Call(
            name=str(call["name"]),
            arguments=dict(call.get("arguments") or {}),
            takes_strategy=bool(call.get("takesStrategy")),
            takes_progress=bool(call.get("takesProgress")),
            packages=tuple(str(package) for package in call.get("packages") or ()),
            index_url=call.get("indexUrl"),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise TrainerError(ExitCode.BAD_FLAGS, f"{CALL_FILE} is not a call: {error!r}") from error


def install(packages: Sequence[str], index_url: str | None, environ: Mapping[str, str]) -> None:
    """pip-install the packages into a folder of their own, put first on sys.path; BAD_FLAGS with pip's words."""
    if not packages:
        return
    target = Path(environ.get(PACKAGES_DIR_ENV) or tempfile.mkdtemp(prefix="disttrain-packages-"))
    command = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--quiet"]
    command += ["--no-cache-dir"]  # a trainer's user may have no home to cache in
    command += ["--target", str(target), *(["--index-url", index_url] if index_url else []), "--", *packages]
    log("installing", packages=list(packages))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        words = (result.stderr or result.stdout).strip()[-PIP_TAIL:]
        raise TrainerError(ExitCode.BAD_FLAGS, f"pip could not install {' '.join(packages)}: {words}")
    sys.path.insert(0, str(target))


def define(source: str, name: str) -> Callable[..., Any]:
    """The function defined alone in a fresh namespace. Its annotations stay unevaluated: the names they use
    were imported in the function's module, not here."""
    namespace: dict[str, Any] = {"__name__": "__disttrain_function__"}
    lazy_annotations = __future__.annotations.compiler_flag
    exec(compile(source, f"<{name}>", "exec", flags=lazy_annotations, dont_inherit=True), namespace)
    function: Callable[..., Any] = namespace[name]
    return function


def call_function(source: str, call: Call, role: Role) -> None:
    """Define the function alone in a fresh namespace and call it; ps and PS workers serve instead."""
    import tensorflow as tf  # noqa: PLC0415 - after the packages, which may pin what it loads

    if role.has_ps and role.task_type in ("ps", "worker"):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.distribute.Server(resolver.cluster_spec(), job_name=role.task_type, task_index=role.index)
        log("serving", task=f"{role.task_type}:{role.index}", target=server.target)
        server.join()
        return
    function = define(source, call.name)
    arguments = dict(call.arguments)
    if call.takes_strategy:
        arguments["strategy"] = _strategy(role, tf)
    if call.takes_progress:
        arguments["progress"] = _progress_callback(role, tf)
    else:
        _report_from_every_fit(role, tf)
    log("started", task=f"{role.task_type}:{role.index}", function=call.name)
    function(**arguments)


def _strategy(role: Role, tf: Any) -> Any:
    """The strategy TF_CONFIG describes: ParameterServer with a ps job (Keras 3 does not fit under it: the
    function runs its own loop), MultiWorkerMirrored with several training tasks (Keras patched for it,
    `keras_compat`), else Mirrored over this process's devices."""
    if role.task_type == "evaluator":
        return tf.distribute.get_strategy()
    if role.has_ps:
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(resolver)
    if role.training_workers > 1:
        from disttrain_trainer.keras_compat import patch_keras_for_multi_worker  # noqa: PLC0415

        patch_keras_for_multi_worker()  # the function's model.fit works there as it does alone
        return tf.distribute.MultiWorkerMirroredStrategy()
    return tf.distribute.MirroredStrategy()


REPORT_EVERY = 5  # steps between two progress reports


def _progress_callback(role: Role, tf: Any) -> Any:
    """A Keras callback for `fit`: its steps, epoch and loss reported as the trainer reports its own, by the
    reporting task (the chief, else worker 0); the total from `fit`'s steps and epochs."""
    from disttrain_contract.progress import reporting_task  # noqa: PLC0415
    from disttrain_trainer.reporting import ProgressReporter  # noqa: PLC0415

    reports = (role.task_type, role.index) == reporting_task(has_chief=bool(role.cluster.get("chief")))
    folder = Path(os.environ.get("DISTTRAIN_CHECKPOINT_DIR") or tempfile.mkdtemp(prefix="disttrain-progress-"))

    class ProgressCallback(tf.keras.callbacks.Callback):
        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            steps, epochs = self.params.get("steps") or 0, self.params.get("epochs") or 1
            folder.mkdir(parents=True, exist_ok=True)
            self.reporter = ProgressReporter(folder, reports, 0, steps * epochs)
            self.step, self.epoch, self.loss = 0, 0, float("nan")

        def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            self.step += 1
            self.loss = float((logs or {}).get("loss", self.loss))
            if not math.isfinite(self.loss):  # every task sees the same reduced loss, and stops at the same step
                self.reporter.report(self.step, self.epoch, self.loss)
                raise TrainerError(ExitCode.DIVERGED, divergence_message(self.step, self.loss, None))
            if self.step % REPORT_EVERY == 0:
                self.reporter.report(self.step, self.epoch, self.loss)

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            self.reporter.report(self.step, self.epoch, self.loss, finished=True)

    return ProgressCallback()


_FIT_REPORTS = "_disttrain_reports_progress"


def _report_from_every_fit(role: Role, tf: Any) -> None:
    """A function that does not take `progress` still reports the steps of each Keras `fit` it calls, and stops
    at a loss that is no number: `fit` gets the callback beside the function's own (idempotent)."""
    model = tf.keras.Model
    if getattr(model.fit, _FIT_REPORTS, False):
        return
    original = model.fit

    def fit(self: Any, *args: Any, callbacks: list[Any] | None = None, **kwargs: Any) -> Any:
        return original(self, *args, callbacks=[*(callbacks or []), _progress_callback(role, tf)], **kwargs)

    setattr(fit, _FIT_REPORTS, True)
    model.fit = fit


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] = os.environ) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        if len(arguments) != 1:
            raise TrainerError(ExitCode.BAD_FLAGS, f"usage: {RUN_FUNCTION_COMMAND} FOLDER")
        source, call = read_call(Path(arguments[0]))
        role = parse_role(environ.get("TF_CONFIG"))
        install(call.packages, call.index_url, environ)
        call_function(source, call, role)
    except TrainerError as error:
        fail(str(error), diverged=error.code is ExitCode.DIVERGED, program=RUN_FUNCTION_COMMAND)
        return int(error.code)
    except Exception as error:
        traceback.print_exc()
        fail(f"{type(error).__name__}: {error}", program=RUN_FUNCTION_COMMAND)
        return int(ExitCode.INTERNAL_ERROR)
    log("finished")
    return int(ExitCode.SUCCESS)


def entry() -> None:
    sys.exit(main())
