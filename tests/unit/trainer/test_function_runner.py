"""The runner's half before TensorFlow: reading the shipped call, installing its packages, and how each
failure ends the task (a permanent exit code, the reason in the termination message), and the function
defined alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_contract.progress import TERMINATION_MESSAGE_ENV
from disttrain_contract.shipped_call import CALL_FILE, FUNCTION_FILE
from disttrain_trainer.function_runner import MAX_CALL_BYTES, define, install, main, read_call


def _ship(folder: Path, call: object, source: str = "def fit():\n    pass\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FUNCTION_FILE).write_text(source)
    (folder / CALL_FILE).write_text(json.dumps(call))
    return folder


def test_a_shipped_call_is_read_whole(tmp_path: Path) -> None:
    call = {"name": "fit", "arguments": {"epochs": 2}, "takesStrategy": True, "packages": ["six"], "indexUrl": None}
    source, read = read_call(_ship(tmp_path, call))
    assert source == "def fit():\n    pass\n"
    assert (read.name, read.arguments, read.takes_strategy, read.takes_progress) == ("fit", {"epochs": 2}, True, False)
    assert read.packages == ("six",)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        ({"arguments": {}}, "call.json is not a call: KeyError('name')"),
        ({"name": "fit", "arguments": [1]}, "call.json is not a call"),
        ("x" * (MAX_CALL_BYTES + 10), f"call.json is over {MAX_CALL_BYTES} bytes"),
    ],
    ids=["no-name", "arguments-not-a-dict", "over-the-bound"],
)
def test_a_call_that_is_not_one_is_a_bad_flag(tmp_path: Path, call: object, words: str) -> None:
    with pytest.raises(TrainerError) as refused:
        read_call(_ship(tmp_path, call))
    assert refused.value.code is ExitCode.BAD_FLAGS and words in str(refused.value)


def test_a_package_pip_cannot_find_is_a_bad_flag_with_pip_s_words(tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    environ = {"DISTTRAIN_PACKAGES_DIR": str(tmp_path / "packages")}
    with pytest.raises(TrainerError) as refused:
        install(["no-such-package==1.0"], index.as_uri(), environ)
    assert refused.value.code is ExitCode.BAD_FLAGS
    assert "pip could not install no-such-package==1.0" in str(refused.value)
    assert "No matching distribution found for no-such-package==1.0" in str(refused.value)


def test_a_missing_folder_ends_the_task_with_its_reason_in_the_termination_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    message = tmp_path / "termination-message"
    monkeypatch.setenv(TERMINATION_MESSAGE_ENV, str(message))
    assert main([str(tmp_path / "absent")], {}) == ExitCode.BAD_FLAGS
    assert "the shipped function is not in" in json.loads(message.read_text())["error"]


def test_a_function_is_defined_alone_with_its_annotations_unevaluated() -> None:
    source = "def fit(strategy: tf.distribute.Strategy, epochs: Epochs = 2) -> History:\n    return epochs * 2\n"
    fit = define(source, "fit")  # tf, Epochs and History were names of the function's module, not here
    assert fit(strategy=None, epochs=3) == 6
    assert fit.__annotations__["epochs"] == "Epochs"
    with pytest.raises(NameError, match="'json' is not defined"):
        define("def report():\n    return json.dumps({})\n", "report")()  # what it uses it must import
