"""The images' promises, read from the Dockerfiles (this machine has no Docker engine to build them;
tests/e2e builds and runs both where one exists): multi-stage, pinned, non-root, no build tools."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from support import ROOT

DOCKERFILES = [ROOT / "Dockerfile", ROOT / "trainer_image" / "Dockerfile"]
PINNED = r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?|[\w./-]+@sha256:[0-9a-f]{64}"
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make ", "clang", "apt-get install", "apk add")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _stages(path: Path) -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for instruction in _instructions(path):
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return stages


def _base_images(path: Path) -> list[str]:
    instructions = _instructions(path)
    defaults = dict(arguments.split("=", 1) for kind, arguments in instructions if kind == "ARG" and "=" in arguments)
    images = [arguments.split()[0] for kind, arguments in instructions if kind == "FROM"]
    return [re.sub(r"\$\{(\w+)\}", lambda match: defaults[match.group(1)], image) for image in images]


@pytest.mark.parametrize("path", DOCKERFILES, ids=["operator", "trainer"])
def test_images_are_multi_stage_from_a_pinned_base(path: Path) -> None:
    assert len(_stages(path)) >= 2
    for image in _base_images(path):
        assert re.fullmatch(PINNED, image), f"{image} is not pinned to a full version or a digest"


@pytest.mark.parametrize("path", DOCKERFILES, ids=["operator", "trainer"])
def test_the_final_stage_runs_as_non_root_and_installs_only_built_wheels(path: Path) -> None:
    final = _stages(path)[-1]
    (user,) = [arguments for instruction, arguments in final if instruction == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or int(gid) > 0), user  # numeric, so runAsNonRoot can verify
    runs = " ".join(arguments for instruction, arguments in final if instruction == "RUN")
    assert "pip install" in runs and "--no-index" in runs  # nothing fetched or compiled in the final stage
    assert not [tool for tool in BUILD_TOOLS if tool in runs]
    build = " ".join(arguments for stage in _stages(path)[:-1] for kind, arguments in stage if kind == "RUN")
    assert "--constraint constraints.txt" in build


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_constraints_pin_every_runtime_dependency_within_what_the_project_allows() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    for text in [*project["dependencies"], *project["optional-dependencies"]["trainer"]]:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])


def test_the_readme_says_how_to_build_both_images() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "docker build -t disttrain/operator:0.1.0 ." in readme
    assert "docker build -f trainer_image/Dockerfile -t disttrain/trainer:0.1.0 ." in readme
