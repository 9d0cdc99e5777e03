"""The docs as a reader meets them: README's links lead somewhere, its first job is a valid job, and
every page under docs/ builds with no broken link or anchor (`mkdocs build --strict`)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from disttrain_cli.main import main
from disttrain_core.api import yaml_io
from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES
from disttrain_core.api.status import DistTrainJobStatus
from disttrain_dev import readme
from support.repository import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_page_builds_without_a_broken_link(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    pages = {path.parent.name for path in tmp_path.glob("*/index.html")}
    assert {path.stem for path in (ROOT / "docs").glob("*.md")} - {"index"} <= pages


def test_readme_s_links_lead_to_files_of_the_repository() -> None:
    links = LINK.findall((ROOT / "README.md").read_text())
    local = [link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "README links to no page"
    assert [link for link in local if not (ROOT / link).is_file()] == []


def test_readme_s_first_job_renders_two_workers_and_a_tensorboard(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(readme.block("first-job"))
    assert main(["render", str(manifest)]) == 0
    kinds = [document["kind"] for document in yaml_io.load_all(capsys.readouterr().out)]
    trainers = ["Service", "NetworkPolicy", "PersistentVolumeClaim", "Pod", "Pod"]
    assert kinds == [*trainers, "Deployment", "Service", "NetworkPolicy"]


def test_the_api_page_names_every_status_field_and_printer_column() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    fields = [field.alias or name for name, field in DistTrainJobStatus.model_fields.items()]
    assert [field for field in fields if f"`{field}`" not in page] == []
    (definition,) = yaml_io.load_all((ROOT / "crds" / "disttrain.io_disttrainjobs.yaml").read_text())
    columns = [column["name"] for column in definition["spec"]["versions"][0]["additionalPrinterColumns"]]
    assert [column for column in columns if column not in page] == []


def test_the_admins_page_lists_every_supported_kubernetes_release_and_the_default() -> None:
    page = (ROOT / "docs" / "admins.md").read_text()
    table = page.split("## Supported Kubernetes versions", 1)[1].split("\n## ", 1)[0]
    tested = [line.split("|")[2].strip() for line in table.splitlines() if line.startswith("| 1.")]
    assert sorted(tested) == sorted(SUPPORTED_KUBERNETES)
    assert f"({KUBERNETES_VERSION}, the version the local cluster builds" in table


def test_every_word_of_the_glossary_is_where_it_says() -> None:
    """docs/architecture.md's glossary names, for each word, the module that holds it and the name the code
    gives it: both exist, so a rename that leaves the glossary behind fails here."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## Words the code uses", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    missing = []
    for word, means, where in rows[1:]:  # past the header
        module = importlib.import_module(where.strip().strip("`"))
        for name in re.findall(r"\(`([\w.]+)`\)", means):
            owner: object = module
            for part in name.split("."):
                owner = getattr(owner, part, None)
            if owner is None:
                missing.append(f"{word.strip()}: {name}")
    assert len(rows) > 10 and missing == []
