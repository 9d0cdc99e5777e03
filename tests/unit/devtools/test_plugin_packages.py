"""The Headlamp plugin's packages come from the cache, installed once per package-lock.json: a fresh checkout
gets them as hard links in seconds, a changed lock installs anew, and a developer's own node_modules stays.
A stand-in npm records what it was asked to do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from disttrain_dev import headlamp

NPM = """#!/bin/sh
echo "$*" >> "$NPM_CALLS"
case "$1" in
  ci) mkdir -p node_modules/.bin && touch node_modules/.bin/headlamp-plugin && echo kit > node_modules/kit.js ;;
  run) mkdir -p dist && echo built > dist/main.js ;;
esac
"""


@pytest.fixture
def calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "npm").write_text(NPM)
    (tools / "npm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DISTTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    log = tmp_path / "npm-calls"
    monkeypatch.setenv("NPM_CALLS", str(log))
    return log


def _checkout(folder: Path, lock: str = "v1") -> Path:
    plugin = folder / headlamp.PLUGIN_FOLDER
    plugin.mkdir(parents=True)
    (plugin / "package.json").write_text('{"name": "plugin"}')
    (plugin / "package-lock.json").write_text(lock)
    return plugin


def _npm_calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_checkouts_share_one_install_linked_and_a_changed_lock_installs_anew(calls: Path, tmp_path: Path) -> None:
    first = _checkout(tmp_path / "first")
    assert headlamp.build_plugin(first).read_text() == "built\n"
    assert _npm_calls(calls) == ["ci --no-audit --no-fund", "run build"]

    second = _checkout(tmp_path / "second")
    headlamp.build_plugin(second)
    assert _npm_calls(calls)[2:] == ["run build"]  # no second install
    kit = second / "node_modules" / "kit.js"
    assert kit.stat().st_ino == (first / "node_modules" / "kit.js").stat().st_ino  # linked, not copied
    assert not (second / "node_modules").is_symlink()  # the kit's test runner refuses files outside the plugin's folder

    (second / "package-lock.json").write_text("v2")
    (second / "node_modules" / "stale.js").write_text("from v1")
    headlamp.build_plugin(second)
    assert _npm_calls(calls)[3:] == ["ci --no-audit --no-fund", "run build"]
    assert not (second / "node_modules" / "stale.js").exists()
    assert kit.stat().st_ino != (first / "node_modules" / "kit.js").stat().st_ino


def test_a_developers_own_packages_are_left_as_they_are(calls: Path, tmp_path: Path) -> None:
    plugin = _checkout(tmp_path)
    own = plugin / "node_modules" / ".bin"
    own.mkdir(parents=True)
    (own / "headlamp-plugin").touch()
    headlamp.build_plugin(plugin)
    assert _npm_calls(calls) == ["run build"]
    assert sorted(path.name for path in (plugin / "node_modules").iterdir()) == [".bin"]
