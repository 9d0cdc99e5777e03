"""The images' promises, read from the Dockerfiles and from the wheels their build stages make:
multi-stage, pinned, non-root, no build tools, and the operator image without the trainer or the
development tools. tests/e2e builds and runs both images where a Docker engine runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from disttrain_dev.images import instructions, stages
from support.repository import ROOT

DOCKERFILES = [ROOT / "Dockerfile", ROOT / "trainer_image" / "Dockerfile"]
PINNED = r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?|[\w./-]+@sha256:[0-9a-f]{64}"
BUILD_TOOLS = ("gcc", "g++", "build-essential", "make ", "clang", "apt-get install", "apk add")


def _base_images(path: Path) -> list[str]:
    found = instructions(path)
    defaults = dict(arguments.split("=", 1) for kind, arguments in found if kind == "ARG" and "=" in arguments)
    images = [arguments.split()[0] for kind, arguments in found if kind == "FROM"]
    return [re.sub(r"\$\{(\w+)\}", lambda match: defaults[match.group(1)], image) for image in images]


@pytest.mark.parametrize("path", DOCKERFILES, ids=["operator", "trainer"])
def test_images_are_multi_stage_from_a_pinned_base(path: Path) -> None:
    assert len(stages(path)) >= 2
    for image in _base_images(path):
        assert re.fullmatch(PINNED, image), f"{image} is not pinned to a full version or a digest"


@pytest.mark.parametrize("path", DOCKERFILES, ids=["operator", "trainer"])
def test_the_final_stage_runs_as_non_root_and_installs_only_built_wheels(path: Path) -> None:
    final = stages(path)[-1]
    (user,) = [arguments for instruction, arguments in final if instruction == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or int(gid) > 0), user  # numeric, so runAsNonRoot can verify
    runs = " ".join(arguments for instruction, arguments in final if instruction == "RUN")
    assert "pip install" in runs and "--no-index" in runs  # nothing fetched or compiled in the final stage
    assert not [tool for tool in BUILD_TOOLS if tool in runs]
    build = " ".join(arguments for stage in stages(path)[:-1] for kind, arguments in stage if kind == "RUN")
    assert "--constraint constraints.txt" in build


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def test_constraints_pin_every_runtime_dependency_within_what_the_project_allows() -> None:
    operator = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    trainer = tomllib.loads((ROOT / "trainer_image" / "pyproject.toml").read_text())["project"]
    pins = _pins()
    extras = operator["optional-dependencies"]
    needed = [
        *operator["dependencies"],
        *extras["operator"],
        *extras["dashboard"],
        *trainer["dependencies"],
        *trainer["optional-dependencies"]["tensorflow"],
    ]
    for text in needed:
        requirement = Requirement(text)
        name = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if name.startswith("disttrain"):  # the project's own distributions, built from the checkout
            continue
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])


def test_the_docs_say_how_to_build_both_images() -> None:
    page = (ROOT / "docs" / "images.md").read_text()
    assert "docker build -t disttrain/operator:0.1.0 ." in page
    assert "docker build -f trainer_image/Dockerfile -t disttrain/trainer:0.1.0 ." in page


def _build_stage_wheels(dockerfile: Path, context: Path, out: Path) -> list[Path]:
    """The wheels the image's build stage makes, from only what that stage copies in, without a Docker engine."""
    (build, *_) = stages(dockerfile)
    for instruction, arguments in build:
        if instruction == "COPY":
            *sources, target = arguments.split()
            for source in sources:
                destination = context / target / Path(source).name if target.endswith("/") else context / target
                if (ROOT / source).is_dir():
                    shutil.copytree(
                        ROOT / source, destination, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
                    )
                else:
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / source, destination)
    (command,) = [arguments for instruction, arguments in build if instruction == "RUN" and "pip wheel" in arguments]
    local = [word.strip("'") for word in command.split() if word.strip("'").startswith(".")]
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir"]
    subprocess.run([*pip, str(out), *local], cwd=context, check=True)
    return sorted(out.glob("*.whl"))


def test_the_operator_image_holds_no_development_code_and_no_trainer(tmp_path: Path) -> None:
    wheels = _build_stage_wheels(ROOT / "Dockerfile", tmp_path / "context", tmp_path / "wheels")
    assert [wheel.name.split("-")[0] for wheel in wheels] == ["disttrain", "disttrain_contract"]
    packages = set()
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            packages |= {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith("-info")}
            metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
            lines = archive.read(metadata).decode().splitlines()
            installed = [line for line in lines if line.startswith("Requires-Dist") and "extra ==" not in line]
            assert not [line for line in installed if "disttrain-dev" in line or "disttrain-trainer" in line], installed
    shipped = {
        "disttrain",
        "disttrain_cli",
        "disttrain_core",
        "disttrain_dashboard",
        "disttrain_kube",
        "disttrain_operator",
    }
    assert packages == {*shipped, "disttrain_contract"}  # the client is `disttrain`
    assert '"disttrain[operator,dashboard]"' in (ROOT / "Dockerfile").read_text()  # kopf, and the dashboard's web stack
