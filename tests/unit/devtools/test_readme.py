"""README's blocks and what the quick start printed, as CI and tests/e2e read them to run README's first job and
the docs' tour."""

from __future__ import annotations

import os
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
    assert readme.fenced("example", page) == ("sh", "echo one\necho two\n")
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
        readme.walk(without)


def test_every_block_of_the_tour_is_marked_as_a_shell_or_python_block() -> None:
    """The tour runs each block by what its fence says: bash or Python."""
    for page, marker in readme.TOUR:
        language, _ = readme.fenced(marker, readme.ROOT / page)
        assert language in ("sh", "python"), (page, marker, language)


SERVER = """
echo "<html>the page</html>" > index.html
python3 -u -c 'import http.server, socketserver
with socketserver.TCPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler) as served:
    print(f"http://127.0.0.1:{served.server_address[1]}/")
    served.serve_forever()'
"""


@pytest.mark.parametrize(("expected", "returncode"), [("the page", 0), ("another page", 1)])
def test_a_block_that_serves_is_read_at_the_address_it_prints_then_stopped(
    tmp_path: Path, expected: str, returncode: int
) -> None:
    result = readme.serve_block(SERVER, tmp_path, dict(os.environ), expected)
    assert result.returncode == returncode, result.stdout
    assert f"a page that holds {expected!r}" in result.stdout
