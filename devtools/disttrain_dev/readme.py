"""README's commands as a user runs them: a fenced block between `<!-- NAME -->` and `<!-- /NAME -->`, and
README's first job after its first command, with the KUBECONFIG and the kubectl the quick start printed.
CI runs the first job right after the first command; tests/e2e runs both on the node CI did not take."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
KUBECONFIG_LINE = re.compile(r"^KUBECONFIG=(.+)$", re.MULTILINE)
FIRST_JOB_HEADER = "+ README's first job"  # what `main` prints first
KUBECTL_LINE = re.compile(r"^kubectl of the cluster's version: (.+)$", re.MULTILINE)


def block(marker: str, document: Path = README) -> str:
    """The fenced block between `<!-- marker -->` and `<!-- /marker -->` in README.md (or another page)."""
    text = document.read_text()
    if f"<!-- {marker} -->\n" not in text:
        raise ValueError(f"{document.name} has no block between <!-- {marker} --> markers")
    marked = text.split(f"<!-- {marker} -->\n", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    fenced = marked.split("```", 2)[1]
    return fenced.split("\n", 1)[1]  # past the fence's language


def run_first_job(
    quickstart_output: str, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    """README's "Your first job" word for word: its YAML saved as job.yaml in a new folder, then its commands
    run there by bash with the KUBECONFIG and the kubectl that the quick start printed, `disttrain` from the
    environment the quick start installed into (this one), and `env` added."""
    kubeconfig, kubectl = (_printed(line, quickstart_output) for line in (KUBECONFIG_LINE, KUBECTL_LINE))
    path = os.pathsep.join([str(Path(kubectl).parent), str(Path(sys.executable).parent), os.environ["PATH"]])
    with tempfile.TemporaryDirectory(prefix="first-job-") as folder:
        Path(folder, "job.yaml").write_text(block("first-job"))
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-xc", block("first-job-commands")],
            cwd=folder,
            env={**os.environ, **(env or {}), "KUBECONFIG": kubeconfig, "PATH": path},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _printed(line: re.Pattern[str], output: str) -> str:
    found = line.findall(output)
    if not found:
        raise ValueError(f"the quick start's output has no line matching {line.pattern!r}")
    return str(found[-1]).strip()


def main(argv: list[str]) -> int:
    """`python -m disttrain_dev.readme first-job QUICKSTART_OUTPUT`: README's first job after the quick start
    whose output that file holds; its commands' output, on stdout."""
    if len(argv) != 2 or argv[0] != "first-job":
        print("usage: python -m disttrain_dev.readme first-job QUICKSTART_OUTPUT", file=sys.stderr)
        return 2
    output = Path(argv[1]).read_text()
    print(FIRST_JOB_HEADER, flush=True)
    result = run_first_job(output)
    print(result.stdout + result.stderr, end="")
    return result.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
