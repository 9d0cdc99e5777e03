"""Build the real node's binaries once per version set: kubelet and kube-proxy (from the same module
as the control plane), containerd 2, runc, CoreDNS, local-path-provisioner, and the pause program.

Each has a module the proxy serves without replace directives, so `go install` builds it; runc needs
cgo and libseccomp for its seccomp filters (`apt-get install libseccomp-dev pkg-config`). The pause
program is the kubernetes module's own C source, linked statically with gcc.
"""

from __future__ import annotations

import shutil

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION
from disttrain_dev import versions
from disttrain_dev.build import build_kubernetes, ensure_binaries, ensure_built, go_install, module_dir
from disttrain_dev.tool_run import run_tool
from disttrain_dev.versions import CachePaths

PAUSE_SOURCE = "build/pause/linux/pause.c"


def missing_node_binaries(node: CachePaths) -> list[str]:
    return [name for name in versions.NODE_BINARIES if not node.binary(name).is_file()]


def build_pause(node: CachePaths) -> None:
    source = module_dir("k8s.io/kubernetes", KUBERNETES_VERSION) / PAUSE_SOURCE
    tag = versions.PAUSE_IMAGE.rsplit(":", 1)[1]
    output = str(node.binary("pause"))
    run_tool(["gcc", "-Os", "-static", "-Wall", "-Werror", f"-DVERSION=v{tag}", "-o", output, str(source)])


def ensure_node_binaries() -> CachePaths:
    """Build whatever the real node lacks; a warm cache returns at once. Needs Go, gcc and libseccomp."""
    node = versions.node_cache_paths()
    ensure_built(node.root, lambda: missing_node_binaries(node), lambda missing: _build_node(node, set(missing)))
    return node


def _build_node(node: CachePaths, missing: set[str]) -> None:
    for tool in ("go", "gcc", "pkg-config"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is needed once to build the real node, and none is on PATH")
    node.bin.mkdir(parents=True, exist_ok=True)
    if missing & set(versions.NODE_KUBERNETES_COMMANDS):
        build_kubernetes(ensure_binaries(), versions.NODE_KUBERNETES_COMMANDS, node.bin)
    if missing & set(versions.CONTAINERD_COMMANDS):
        for command in versions.CONTAINERD_COMMANDS:
            go_install(f"github.com/containerd/containerd/v2/cmd/{command}@{versions.CONTAINERD_VERSION}", node.bin)
    if "runc" in missing:
        go_install(f"github.com/opencontainers/runc@{versions.RUNC_VERSION}", node.bin, cgo=True, tags="seccomp")
    if "coredns" in missing:
        go_install(f"github.com/coredns/coredns@{versions.COREDNS_VERSION}", node.bin)
    if "local-path-provisioner" in missing:
        go_install(f"github.com/rancher/local-path-provisioner@{versions.LOCAL_PATH_VERSION}", node.bin)
    if "pause" in missing:
        build_pause(node)


if __name__ == "__main__":
    print(ensure_node_binaries().bin)
