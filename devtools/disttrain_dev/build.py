"""Build the control-plane binaries from their published Go modules, once per version set.

`go install k8s.io/kubernetes/cmd/...@version` cannot work: the kubernetes module replaces its
staging modules with local folders. A throw-away module that requires it and replaces each staging
module with its published release builds the same commands. etcd's server module is `package main`
with replace directives of its own, so it gets a module of its own too; kwok has none and installs
directly.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from disttrain_contract.timestamps import format_time
from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION
from disttrain_dev import versions
from disttrain_dev.tool_run import run_tool
from disttrain_dev.versions import CachePaths

# Every binary is linked with `-s -w`, without DWARF; the compiler then need not make it either: kube-scheduler
# built cold took 411 CPU-seconds with `-dwarf=false` against 458 without (docs/testing.md).
GOFLAGS = "-buildvcs=false -gcflags=all=-dwarf=false"


def go_env(cgo: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "1" if cgo else "0", "GOFLAGS": GOFLAGS})
    return env


def run_go(args: list[str], cwd: Path) -> None:
    run_tool(["go", *args], cwd=cwd, env=go_env())


def go_install(target: str, bin_dir: Path, cgo: bool = False, tags: str = "") -> None:
    """`go install` a module's command at a version into `bin_dir` (modules without replace directives)."""
    args = ["install", "-trimpath", "-ldflags=-s -w", *([f"-tags={tags}"] if tags else []), target]
    run_tool(["go", *args], env=go_env(cgo) | {"GOBIN": str(bin_dir)})


def module_dir(module: str, version: str) -> Path:
    """Where the Go module cache holds a module's files, downloading them if needed."""
    download = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        env=go_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(json.loads(download.stdout)["Dir"])


def _write_module(folder: Path, name: str, requires: dict[str, str], replaces: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"module {name}", "", "go 1.26", ""]
    lines += [f"require {module} {version}" for module, version in requires.items()]
    lines += [f"replace {module} => {module} {version}" for module, version in replaces.items()]
    (folder / "go.mod").write_text("\n".join(lines) + "\n")


def _version_ldflags(kubernetes: str) -> str:
    """Stamp the version the way upstream's build does, so `/version` reports a real release."""
    major, minor = kubernetes.lstrip("v").split(".")[:2]
    stamp = {
        "gitVersion": kubernetes,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "buildDate": format_time(datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)),
    }
    packages = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    flags = [f"-X {package}.{key}={value}" for package in packages for key, value in stamp.items()]
    return " ".join(["-s", "-w", *flags])


def build_kubernetes(paths: CachePaths, names: tuple[str, ...], out: Path) -> None:
    """Build Kubernetes commands into `out`; the module lists the node's commands too, so one tidy serves both."""
    folder = paths.src / "kubernetes"
    staging = {f"k8s.io/{name}": versions.staging_version(paths.kubernetes) for name in versions.STAGING_MODULES}
    _write_module(folder, "disttrain.local/kubernetes", {"k8s.io/kubernetes": paths.kubernetes}, staging)
    every = (*versions.KUBERNETES_COMMANDS, *versions.NODE_KUBERNETES_COMMANDS)
    (folder / "tools.go").write_text(
        "//go:build tools\n\npackage tools\n\nimport (\n"
        + "".join(f'\t_ "k8s.io/kubernetes/cmd/{name}"\n' for name in every)
        + ")\n"
    )
    run_go(["mod", "tidy"], folder)
    build_args = ["build", "-trimpath", "-tags=selinux,notest", f"-ldflags={_version_ldflags(paths.kubernetes)}"]
    out.mkdir(parents=True, exist_ok=True)
    run_go([*build_args, "-o", str(out) + "/", *(f"k8s.io/kubernetes/cmd/{name}" for name in names)], folder)


def build_etcd(paths: CachePaths) -> None:
    folder = paths.src / "etcd"
    module = "go.etcd.io/etcd/server/v3"
    _write_module(folder, "disttrain.local/etcd", {}, {})
    (folder / "tools.go").write_text(f'//go:build tools\n\npackage tools\n\nimport _ "{module}"\n')
    run_go(["get", f"{module}@{versions.ETCD_VERSION}"], folder)
    run_go(["mod", "tidy"], folder)
    run_go(["build", "-trimpath", "-ldflags=-s -w", "-o", str(paths.binary("etcd")), module], folder)


def build_kwok(paths: CachePaths) -> None:
    """kwok's controller alone: the cluster runs it as a process of its own, so kwokctl is never built."""
    go_install(f"sigs.k8s.io/kwok/cmd/kwok@{versions.KWOK_VERSION}", paths.bin)


def copy_kwok_stages(paths: CachePaths) -> None:
    """kwok's default stages ship in its module, not its binary: keep them beside the binaries."""
    stage_root = module_dir("sigs.k8s.io/kwok", versions.KWOK_VERSION) / "kustomize" / "stage"
    paths.kwok_stages.mkdir(parents=True, exist_ok=True)
    for relative in versions.KWOK_STAGES:
        shutil.copyfile(stage_root / relative, paths.kwok_stages / Path(relative).name)
    shutil.copyfile(stage_root / versions.KWOK_STORAGE_CLASS, paths.kwok_storage_class)


def missing_binaries(paths: CachePaths) -> list[str]:
    missing = [name for name in paths.own_binaries if not paths.binary(name).is_file()]
    stages = [Path(relative).name for relative in versions.KWOK_STAGES]
    missing += [name for name in stages if not (paths.kwok_stages / name).is_file()]
    return missing + ([] if paths.kwok_storage_class.is_file() else [paths.kwok_storage_class.name])


def ensure_binaries(paths: CachePaths | None = None) -> CachePaths:
    """Build whatever binary of the pinned set is not cached yet; a warm cache returns at once. An older
    release's plane needs the default release's kubectl, etcd and kwok too (`CachePaths.binary`)."""
    paths = paths or versions.cache_paths()
    if paths.kubernetes != KUBERNETES_VERSION:
        ensure_binaries()
    ensure_built(paths.root, lambda: missing_binaries(paths), lambda missing: _build_binaries(paths, set(missing)))
    return paths


def _build_binaries(paths: CachePaths, missing: set[str]) -> None:
    if shutil.which("go") is None:
        raise RuntimeError("Go is needed once to build the local control plane, and none is on PATH")
    paths.bin.mkdir(parents=True, exist_ok=True)
    commands = tuple(name for name in paths.own_binaries if name in versions.KUBERNETES_COMMANDS)
    if missing & set(commands):
        build_kubernetes(paths, commands, paths.bin)
    if "etcd" in missing:
        build_etcd(paths)
    if "kwok" in missing:
        build_kwok(paths)
    if missing - set(versions.ALL_BINARIES):
        copy_kwok_stages(paths)


def ensure_built(folder: Path, missing: Callable[[], list[str]], build: Callable[[list[str]], None]) -> None:
    """Build what a cache folder lacks, once, whoever asks: `build` gets what `missing` names, under the
    folder's lock, so a second caller (a test's set-up while CI builds ahead in the background) waits for
    the first and then finds it done. A warm cache returns at once; a build that leaves a part out raises."""
    if not missing():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f"{folder.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lacking = missing()
        if lacking:  # else built by another process meanwhile
            build(lacking)
            require_built(missing())


def require_built(still_missing: list[str]) -> None:
    """A build that ran without error yet left a binary out is an error of its own, named."""
    if still_missing:
        raise RuntimeError(f"build finished but these binaries are missing: {', '.join(still_missing)}")


if __name__ == "__main__":
    print(ensure_binaries().bin)
