"""Command-line tools built from their Go modules and cached by version, like the control plane: each
is built once per version (`go install`, no cgo, under its cache folder's lock, so that CI's build ahead
and a test that needs the tool build it once), then found in the cache."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from disttrain_dev.build import ensure_built, go_install
from disttrain_dev.versions import cache_root


@dataclass(frozen=True)
class GoTool:
    name: str
    package: str  # the command's package path, without a version
    version: str

    def folder(self) -> Path:
        return cache_root() / "tools" / f"{self.name}-{self.version}"

    def unavailable(self) -> str | None:
        """Why the tool cannot be had here, or None: it is cached, or Go can build it."""
        if (self.folder() / self.name).is_file() or shutil.which("go") is not None:
            return None
        return f"{self.name} is built from its Go module ({self.package}@{self.version}): needs Go"

    def ensure(self) -> Path:
        """The binary, built first if this version is not in the cache (needs Go)."""
        binary = self.folder() / self.name

        def build(_: list[str]) -> None:
            go_install(f"{self.package}@{self.version}", self.folder())

        ensure_built(self.folder(), lambda: [] if binary.is_file() else [self.name], build)
        return binary


# actionlint checks the GitHub Actions workflow that runs the project's CI on hosted runners (about a
# minute cold on 2 cores).
ACTIONLINT = GoTool("actionlint", "github.com/rhysd/actionlint/cmd/actionlint", "v1.7.12")
# helm lints, renders, packages and installs charts/disttrain (a few minutes cold on 2 cores).
HELM = GoTool("helm", "helm.sh/helm/v4/cmd/helm", "v4.3.1")
# kube-router's firewall enforces NetworkPolicy beside the real node in the test that proves each job's
# policy (network_policy_controller.py says why this one; about 5 minutes cold on 2 cores).
KUBE_ROUTER = GoTool("kube-router", "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router", "v2.1.0")

TOOLS = {tool.name: tool for tool in (ACTIONLINT, HELM, KUBE_ROUTER)}


def main(argv: list[str]) -> int:
    """`python -m disttrain_dev.go_tools TOOL ARGS...`: run a tool, built first where this version is not
    cached (CI's lint step builds them there rather than in the unit run)."""
    if not argv or argv[0] not in TOOLS:
        print(f"usage: python -m disttrain_dev.go_tools {{{','.join(TOOLS)}}} ARGS...", file=sys.stderr)
        return 2
    return subprocess.run([str(TOOLS[argv[0]].ensure()), *argv[1:]], check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
