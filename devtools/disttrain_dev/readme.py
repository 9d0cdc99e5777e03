"""README's commands as a user runs them: a fenced block between `<!-- NAME -->` and `<!-- /NAME -->`; and the
newcomer's path after README's first command: README's first job, then the tour, the blocks of docs/ that a
user runs on the local cluster after it, with the KUBECONFIG and the kubectl the quick start printed.
CI walks that path right after the first command; tests/e2e walks it on the node CI did not take."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from disttrain_dev.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
KUBECONFIG_LINE = re.compile(r"^KUBECONFIG=(.+)$", re.MULTILINE)
FIRST_JOB_HEADER = "+ README's first job"  # what `main` prints first
TOUR_HEADER = "+ the tour: "  # then before each of the tour's blocks, with its page and marker
KUBECTL_LINE = re.compile(r"^kubectl of the cluster's version: (.+)$", re.MULTILINE)
# Each block of docs/ that a user runs as written on the quick start's cluster after README's first job
# (its job `digits` in namespace `first`), in order, from the checkout.
TOUR = (
    ("docs/logs.md", "tour-logs"),
    ("docs/logs.md", "tour-logs-python"),
    ("docs/admins.md", "tour-jobs"),
    ("docs/admins.md", "tour-completion"),
    ("docs/tensorboard.md", "tour-tensorboard"),
    ("docs/tensorboard.md", "tour-tensorboard-python"),
    ("docs/admins.md", "tour-dashboard"),
    ("docs/client.md", "tour-client"),
)
# The blocks whose last command serves until Ctrl-C, with what the page at the address it prints must hold.
SERVES = {"tour-tensorboard": "TensorBoard", "tour-dashboard": "digits"}
SERVED_AT = re.compile(r"http://127\.0\.0\.1:\d+/")
STEP_SECONDS = 900


def fenced(marker: str, document: Path = README) -> tuple[str, str]:
    """The language and text of the fenced block between `<!-- marker -->` and `<!-- /marker -->` in README.md
    (or another page)."""
    text = document.read_text()
    if f"<!-- {marker} -->\n" not in text:
        raise ValueError(f"{document.name} has no block between <!-- {marker} --> markers")
    marked = text.split(f"<!-- {marker} -->\n", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    language, body = marked.split("```", 2)[1].split("\n", 1)
    return language.strip(), body


def block(marker: str, document: Path = README) -> str:
    """The text of the fenced block between `<!-- marker -->` and `<!-- /marker -->`."""
    return fenced(marker, document)[1]


def _command(language: str, text: str) -> list[str]:
    """A block as a user runs it: a shell block by bash, echoing each command; Python by this Python."""
    return ["bash", "-euo", "pipefail", "-xc", text] if language in ("sh", "bash") else [sys.executable, "-c", text]


def _run(language: str, text: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = _command(language, text)
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=STEP_SECONDS, check=False
    )


def serve_block(text: str, folder: Path, env: dict[str, str], expected: str) -> subprocess.CompletedProcess[str]:
    """A block whose last command serves until Ctrl-C, as a user runs it: bash runs it until it prints the
    address it serves, whose page is read (it must hold `expected`); then Ctrl-C (SIGINT) stops it."""
    command = _command("sh", text)
    process = subprocess.Popen(
        command,
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # Ctrl-C reaches the block's commands, as a terminal's does
    )
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(process, lines), daemon=True).start()
    printed: list[str] = []
    deadline = time.monotonic() + STEP_SECONDS
    address = None
    while address is None and (line := _next(lines, deadline - time.monotonic())) is not None:
        printed.append(line)
        address = next(iter(SERVED_AT.findall(line)), None)
    page = _page(address) if address is not None else ""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    while (line := _next(lines, 10)) is not None:
        printed.append(line)
    served = address is not None and expected in page
    printed.append(f"{address} {'served' if served else 'did not serve'} a page that holds {expected!r}\n")
    return subprocess.CompletedProcess(command, 0 if served else 1, "".join(printed), "")


def _lines(process: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line)
    lines.put(None)


def _next(lines: queue.Queue[str | None], seconds: float) -> str | None:
    """The next line printed, or None once the output ended or `seconds` passed without one."""
    try:
        return lines.get(timeout=max(0.0, seconds))
    except queue.Empty:
        return None


def _page(address: str, seconds: float = 60) -> str:
    """The page at `address`, once it answers; empty when it does not within `seconds`."""

    def read() -> str | None:
        try:
            with urllib.request.urlopen(address, timeout=10) as answer:
                return str(answer.read().decode(errors="replace"))
        except (urllib.error.URLError, OSError):
            return None

    try:
        return wait_for(f"the page at {address}", read, timeout=seconds, interval=0.5)
    except TimeoutError:
        return ""


def _user_env(quickstart_output: str, env: dict[str, str] | None) -> dict[str, str]:
    """The KUBECONFIG and the kubectl that the quick start printed, `disttrain` from the environment the
    quick start installed into (this one), and `env` added."""
    kubeconfig, kubectl = (_printed(line, quickstart_output) for line in (KUBECONFIG_LINE, KUBECTL_LINE))
    path = os.pathsep.join([str(Path(kubectl).parent), str(Path(sys.executable).parent), os.environ["PATH"]])
    return {**os.environ, **(env or {}), "KUBECONFIG": kubeconfig, "PATH": path}


def _run_first_job(user_env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """README's "Your first job" word for word: its YAML saved as job.yaml in a new folder, then its commands
    run there."""
    with tempfile.TemporaryDirectory(prefix="first-job-") as folder:
        Path(folder, "job.yaml").write_text(block("first-job"))
        return _run("sh", block("first-job-commands"), Path(folder), user_env)


def walk(quickstart_output: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """README's first job, then each block of the tour from the checkout, until one fails: the exit code of
    the last that ran, and what each printed under its header."""
    user_env = _user_env(quickstart_output, env)
    transcript = [FIRST_JOB_HEADER]
    result = _run_first_job(user_env)
    transcript.append(result.stdout + result.stderr)
    for page, marker in TOUR:
        if result.returncode != 0:
            break
        transcript.append(f"{TOUR_HEADER}{page} {marker}")
        language, text = fenced(marker, ROOT / page)
        if marker in SERVES:
            result = serve_block(text, ROOT, user_env, SERVES[marker])
        else:
            result = _run(language, text, ROOT, user_env)
        transcript.append(result.stdout + result.stderr)
    return result.returncode, "\n".join(transcript)


def _printed(line: re.Pattern[str], output: str) -> str:
    found = line.findall(output)
    if not found:
        raise ValueError(f"the quick start's output has no line matching {line.pattern!r}")
    return str(found[-1]).strip()


def main(argv: list[str]) -> int:
    """`python -m disttrain_dev.readme walk QUICKSTART_OUTPUT`: README's first job and the tour after the
    quick start whose output that file holds; what they printed, on stdout."""
    if len(argv) != 2 or argv[0] != "walk":
        print("usage: python -m disttrain_dev.readme walk QUICKSTART_OUTPUT", file=sys.stderr)
        return 2
    returncode, transcript = walk(Path(argv[1]).read_text())
    print(transcript)
    return returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
