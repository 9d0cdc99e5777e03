"""`python -m disttrain_dev.images --output FILE`, as `scripts/e2e.sh` runs it on a new machine: the base is
made from Debian packages and both images are built, every tool printing as it goes, and FILE holds only
the images built. Stand-ins for docker, debootstrap and the rest print to their stdout as the real ones
do, so the test fails the day a tool's output reaches the tool's own stdout or FILE."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from disttrain_core.images import VERSION
from disttrain_dev import images
from support.repository import ROOT

STAND_IN = """#!/bin/sh
echo "$(basename "$0") $* printed this"
case "$(basename "$0") $1 $2" in
  "docker image inspect") exit 1 ;;  # no image exists yet: a new machine
  debootstrap*) mkdir -p "$3/proc" ;;  # debootstrap --variant=minbase SUITE TARGET MIRROR
esac
exit 0
"""
TOOLS = ("docker", "debootstrap", "chroot", "mount", "umount", "tar")


@pytest.fixture
def new_machine(tmp_path: Path) -> dict[str, str]:
    """An environment whose tools are the stand-ins, and whose cache is empty."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        stand_in = bin_dir / tool
        stand_in.write_text(STAND_IN)
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    search = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": search, "DISTTRAIN_CACHE_DIR": str(tmp_path / "cache")}


def test_the_images_file_holds_only_the_images_built_on_a_new_machine(
    new_machine: dict[str, str], tmp_path: Path
) -> None:
    try:
        images.debian_mirror()
    except RuntimeError as error:
        pytest.skip(str(error))
    output = tmp_path / "images"
    command = [sys.executable, "-m", "disttrain_dev.images", "--output", str(output)]
    result = subprocess.run(
        command, env=new_machine, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "debootstrap --variant=minbase" in result.stderr and "docker build" in result.stderr  # the base was made
    assert "printed this" in result.stderr
    assert result.stdout == ""
    lines = [line.split() for line in output.read_text().splitlines()]
    assert [name for name, _ in lines] == [images.OPERATOR.name, images.TRAINER.name]
    assert all(tag.startswith(f"{name}:inputs-") for name, tag in lines)


def test_the_gpu_trainer_is_the_trainers_dockerfile_with_tensorflows_cuda_wheels(
    new_machine: dict[str, str], tmp_path: Path
) -> None:
    """Its several GB are not built here: what it is built from is checked instead. `--gpu` builds the same
    Dockerfile with TensorFlow's `and-cuda` wheels at the version of the CPU wheel the tests ran, and tags it
    as the GPU examples name it."""
    version = next(
        line.split("==")[1]
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith("tensorflow-cpu==")
    )
    assert images.GPU_TRAINER.dockerfile == images.TRAINER.dockerfile
    assert images.GPU_TRAINER.build_args == (("TENSORFLOW", f"tensorflow[and-cuda]=={version}"),)
    assert images.GPU_TRAINER.version_tag == f"disttrain/trainer:{VERSION}-gpu"
    for example in ("multi-worker-mirrored-gpu.yaml", "mirrored-8gpu.yaml"):
        assert f"image: {images.GPU_TRAINER.version_tag}" in (ROOT / "examples" / example).read_text()
    assert images.input_digest(ROOT, images.GPU_TRAINER, "base") != images.input_digest(ROOT, images.TRAINER, "base")
    try:
        images.debian_mirror()
    except RuntimeError as error:
        pytest.skip(str(error))
    command = [sys.executable, "-m", "disttrain_dev.images", "--gpu", "--output", str(tmp_path / "images")]
    result = subprocess.run(
        command, env=new_machine, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert f"--build-arg TENSORFLOW=tensorflow[and-cuda]=={version}" in result.stderr
    built = dict(line.split() for line in (tmp_path / "images").read_text().splitlines())
    assert built[images.GPU_TRAINER.version_tag].startswith("disttrain/trainer:inputs-")
    assert built[images.GPU_TRAINER.version_tag] != built[images.TRAINER.name]


@pytest.mark.tensorflow
def test_the_cpu_wheel_the_tests_ran_has_the_cuda_extra_the_gpu_trainer_installs() -> None:
    """The `and-cuda` extra of the TensorFlow the tests ran brings CUDA, cuDNN and NCCL as pip packages: the
    GPU trainer needs only NVIDIA's driver on the node."""
    assert metadata.version("tensorflow-cpu") in images.GPU_TRAINER.build_args[0][1]
    extra = [
        requirement.split(";")[0]
        for requirement in metadata.requires("tensorflow-cpu") or []
        if "and-cuda" in requirement
    ]
    assert {"nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-cuda-runtime-cu12"} <= {
        r.split("<")[0].split(">")[0] for r in extra
    }
