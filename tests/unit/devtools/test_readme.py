"""README's blocks and what the quick start printed, as CI and tests/e2e read them to run README's first job."""

from __future__ import annotations

from pathlib import Path

import pytest

from disttrain_dev import readme

PAGE = """# A page

<!-- example -->
```sh
echo one
echo two
```
<!-- /example -->
"""


def test_a_block_is_what_lies_between_its_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert readme.block("example", page) == "echo one\necho two\n"
    with pytest.raises(ValueError, match="no block between <!-- missing --> markers"):
        readme.block("missing", page)


def test_readme_s_first_job_and_its_commands_are_marked() -> None:
    assert "kind: DistTrainJob" in readme.block("first-job")
    commands = readme.block("first-job-commands")
    assert commands.startswith("disttrain dev-cluster namespace first\n")
    assert "kubectl apply -n first -f job.yaml" in commands


def test_the_first_job_reads_the_quick_start_s_last_kubeconfig_and_kubectl_lines() -> None:
    without = "quickstart on the process node\nSucceeded\n"
    with pytest.raises(ValueError, match="KUBECONFIG"):
        readme.run_first_job(without)
