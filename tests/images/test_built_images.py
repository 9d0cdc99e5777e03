"""The images' promises, checked on the images themselves: built here from the project's Dockerfiles
(`disttrain_dev.images`: a base made from Debian packages, no registry), then run.

Needs root and a Docker engine (marker `docker`); without one the tests say so and skip. The first
run builds the base (about 3 minutes) and both images; later runs reuse what did not change."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from disttrain_core.images import VERSION
from disttrain_dev import headlamp, images
from support.repository import ROOT

pytestmark = pytest.mark.docker


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    if not _docker_answers():
        pytest.skip("no Docker engine answers here (apt-get install docker.io, then run dockerd as root)")
    return images.ensure_images(ROOT)


def _run(tag: str, *command: str, entrypoint: str = "sh") -> subprocess.CompletedProcess[str]:
    docker = ["docker", "run", "--rm", "--network", "none", "--entrypoint", entrypoint, tag, *command]
    return subprocess.run(docker, capture_output=True, text=True, check=False, timeout=600)


def _user(tag: str) -> str:
    inspected = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True, check=True)
    return str(json.loads(inspected.stdout)[0]["Config"]["User"])


PRESENT = "for tool in {tools}; do command -v $tool && exit 1; done; exit 0"


def test_the_operator_image_runs_the_operator_as_non_root_and_holds_nothing_else(built: dict[str, str]) -> None:
    tag = built[images.OPERATOR.name]
    assert _user(tag) == "65532:65532"
    assert _run(tag, "-c", PRESENT.format(tools="pip pip3 gcc cc make")).returncode == 0
    imports = "import disttrain_operator.handlers, disttrain_contract; print('ok')"
    assert _run(tag, "-c", imports, entrypoint="python").stdout.strip() == "ok"
    # kopf names itself after the user when POD_ID is unset: the user must have a passwd entry
    assert (
        _run(tag, "-c", "import getpass; print(getpass.getuser())", entrypoint="python").stdout.strip() == "disttrain"
    )
    for development in ("disttrain_dev", "disttrain_trainer", "tensorflow"):
        absent = _run(tag, "-c", f"import {development}", entrypoint="python")
        assert absent.returncode != 0 and "ModuleNotFoundError" in absent.stderr, development
    usage = _run(tag, "dev-cluster", "up", entrypoint="disttrain")
    assert "No such command 'dev-cluster'" in usage.stderr
    pages = (
        "from importlib.resources import files; from disttrain_dashboard.app import templates;"
        " templates.get_template('jobs.html'); print((files('disttrain_dashboard') / 'static' /"
        " 'dashboard.js').is_file())"
    )
    assert _run(tag, "-c", pages, entrypoint="python").stdout.strip() == "True"  # the dashboard, with its files


def test_the_trainer_image_trains_as_non_root_without_a_compiler(built: dict[str, str]) -> None:
    tag = built[images.TRAINER.name]
    assert _user(tag) == "1000:1000"
    assert _run(tag, "-c", PRESENT.format(tools="gcc cc make")).returncode == 0
    assert _run(tag, "-c", "import disttrain_operator", entrypoint="python").returncode != 0
    trained = _run(
        tag,
        "--dataset=digits",
        "--model=mlp",
        "--epochs=1",
        "--checkpoint-dir=/tmp/checkpoints",
        entrypoint="disttrain-train",
    )
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    assert '"event": "finished"' in trained.stdout, trained.stdout[-2000:]
    stand_in = _run(tag, "--epochs=1", "--checkpoint-dir=/tmp/checkpoints", entrypoint="disttrain-stand-in")
    assert stand_in.returncode == 0, stand_in.stdout[-2000:] + stand_in.stderr[-2000:]
    assert '"event": "finished"' in stand_in.stdout, stand_in.stdout[-2000:]


def test_the_headlamp_plugin_image_copies_the_built_plugin_into_the_plugins_folder(
    built: dict[str, str], tmp_path: Path
) -> None:
    """The init container of Headlamp's Helm chart (docs/headlamp.md): a non-root copy into the folder."""
    if shutil.which("npm") is None:
        pytest.skip("npm is needed to build the plugin")
    plugin = ROOT / headlamp.PLUGIN_FOLDER
    main = headlamp.build_plugin(plugin)
    tag = f"disttrain/headlamp-plugin:{VERSION}"
    build = ["docker", "build", "--network", "none", "--build-arg", f"BASE_IMAGE={images.base_tag()}", "-t", tag]
    subprocess.run([*build, str(plugin)], check=True, capture_output=True, timeout=600)
    assert _user(tag) == "65532:65532"
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    plugins.chmod(0o777)  # an emptyDir, writable by the pod's user
    copy = ["docker", "run", "--rm", "--network", "none", "-v", f"{plugins}:/headlamp/plugins", tag]
    subprocess.run(copy, check=True, capture_output=True, timeout=120)
    copied = plugins / headlamp.PLUGIN_FOLDER
    assert sorted(path.name for path in copied.iterdir()) == ["main.js", "package.json"]
    assert (copied / "main.js").read_bytes() == main.read_bytes()
