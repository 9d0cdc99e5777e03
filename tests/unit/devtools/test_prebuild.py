"""CI builds ahead, in the background, what the tests' set-up would build: each cache folder is built by one
process at a time, and the prebuild says what it built, skipped or failed, on stderr alone."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from disttrain_dev import prebuild
from disttrain_dev.build import ensure_built


def test_a_second_build_of_a_cache_folder_waits_for_the_first_and_finds_it_done(tmp_path: Path) -> None:
    folder = tmp_path / "cache" / "kueue-0123"
    built: list[str] = []
    building, release = threading.Event(), threading.Event()

    def missing() -> list[str]:
        return [] if (folder / "kueue").exists() else ["kueue"]

    def build(lacking: list[str]) -> None:
        built.extend(lacking)
        building.set()
        release.wait(10)
        folder.mkdir(parents=True)
        (folder / "kueue").touch()

    first = threading.Thread(target=ensure_built, args=(folder, missing, build))
    first.start()
    assert building.wait(10)
    second = threading.Thread(target=ensure_built, args=(folder, missing, build))
    second.start()
    second.join(0.5)
    assert second.is_alive()  # held at the lock while the first builds
    release.set()
    first.join(10)
    second.join(10)
    assert built == ["kueue"]  # built once: the second found it done


def test_a_build_that_leaves_a_part_out_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="missing: kueue"):
        ensure_built(tmp_path / "kueue-0123", lambda: ["kueue"], lambda _: None)


def _fails() -> object:
    raise subprocess.CalledProcessError(2, ["go", "build"])


def test_the_prebuild_says_each_build_on_stderr_and_fails_if_one_failed(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    built: list[str] = []
    builds = (
        ("A", lambda: built.append("A"), lambda: None),
        ("B", lambda: built.append("B"), lambda: "no source tarball"),
        ("C", _fails, lambda: None),
    )
    monkeypatch.setattr(prebuild, "BUILDS", builds)
    assert prebuild.main() == 1
    out, err = capfd.readouterr()
    assert out == "" and built == ["A"]
    lines = err.splitlines()
    assert lines[0].startswith("prebuild: A ready after ")
    assert lines[1:] == [
        "prebuild: B is not built here: no source tarball",
        "prebuild: C failed: Command '['go', 'build']' returned non-zero exit status 2.",
    ]
