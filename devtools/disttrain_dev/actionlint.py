"""actionlint, from its Go module, cached by version like the control plane: it checks the GitHub
Actions workflow that runs the project's CI on hosted runners."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from disttrain_dev.tool_run import run_tool
from disttrain_dev.versions import cache_root

ACTIONLINT_VERSION = "v1.7.12"


def ensure_actionlint() -> Path:
    """The binary, built once per version (about a minute cold on 2 cores; needs Go)."""
    folder = cache_root() / "tools" / f"actionlint-{ACTIONLINT_VERSION}"
    binary = folder / "actionlint"
    if not binary.is_file():
        env = {**os.environ, "GOBIN": str(folder), "CGO_ENABLED": "0", "GOTOOLCHAIN": "local"}
        module = f"github.com/rhysd/actionlint/cmd/actionlint@{ACTIONLINT_VERSION}"
        run_tool(["go", "install", "-trimpath", "-ldflags=-s -w", module], env=env)
    return binary


def main(paths: list[str]) -> int:
    """`python -m disttrain_dev.actionlint WORKFLOW...`: CI's lint step, which builds the binary there (once
    per version) rather than in the unit run."""
    return subprocess.run([str(ensure_actionlint()), "-no-color", *paths], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
