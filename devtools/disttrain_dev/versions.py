"""Pinned versions of the local control plane, and where their binaries are cached.

The cache key is the full set of versions, so bumping one pin rebuilds instead of reusing a stale
binary, and a warm machine finds every binary it needs without touching the network.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION

STAGING_VERSION = "v0" + KUBERNETES_VERSION.removeprefix("v1")  # k8s.io/api v0.36.3 ships with v1.36.3
ETCD_VERSION = "v3.6.10"
KWOK_VERSION = "v0.8.0"

# The staging modules k8s.io/kubernetes replaces with its own staging folders; each is published on its own.
STAGING_MODULES = (
    "api",
    "apiextensions-apiserver",
    "apimachinery",
    "apiserver",
    "cli-runtime",
    "client-go",
    "cloud-provider",
    "cluster-bootstrap",
    "code-generator",
    "component-base",
    "component-helpers",
    "controller-manager",
    "cri-api",
    "cri-client",
    "cri-streaming",
    "csi-translation-lib",
    "dynamic-resource-allocation",
    "endpointslice",
    "externaljwt",
    "kms",
    "kube-aggregator",
    "kube-controller-manager",
    "kube-proxy",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "metrics",
    "mount-utils",
    "pod-security-admission",
    "sample-apiserver",
    "sample-cli-plugin",
    "sample-controller",
    "streaming",
)

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
ALL_BINARIES = (*KUBERNETES_COMMANDS, "etcd", "kwok")

# The real node: built only when asked for, into a folder of its own keyed by these pins.
NODE_KUBERNETES_COMMANDS = ("kubelet", "kube-proxy")
CONTAINERD_VERSION = "v2.2.1"  # Kubernetes 1.36 needs containerd 2
CONTAINERD_COMMANDS = ("containerd", "containerd-shim-runc-v2", "ctr")
RUNC_VERSION = "v1.4.0"  # Debian's runc 1.1 fails under containerd 2; v1.3.x cannot be `go install`ed
COREDNS_VERSION = "v1.13.1"
LOCAL_PATH_VERSION = "v0.0.30"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # the sandbox image containerd is configured with
NODE_BINARIES = (
    *NODE_KUBERNETES_COMMANDS,
    *CONTAINERD_COMMANDS,
    "runc",
    "coredns",
    "local-path-provisioner",
    "pause",
)

# kwok's own stages, from its module: nodes become Ready and keep a lease; pods become Running and
# are removed once deleted (tests end pods by writing their status); claims of the `kwok-volume`
# StorageClass (made the default) are provisioned and bound.
KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
    "volume/fast/pvc-provision.yaml",
    "volume/fast/pvc-delete.yaml",
    "volume/fast/pv-bind.yaml",
    "volume/fast/pv-delete.yaml",
)
KWOK_STORAGE_CLASS = "volume/fast/storage-class.yaml"


@dataclass(frozen=True)
class CachePaths:
    """Folders of one version set: sources (Go module files), binaries and logs of the build."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def kwok_stages(self) -> Path:
        return self.root / "kwok-stages"

    @property
    def kwok_storage_class(self) -> Path:
        return self.root / "kwok-storage-class.yaml"

    def binary(self, name: str) -> Path:
        return self.bin / name


def node_version_key() -> str:
    pins = "|".join((KUBERNETES_VERSION, CONTAINERD_VERSION, RUNC_VERSION, COREDNS_VERSION, LOCAL_PATH_VERSION))
    digest = hashlib.sha256(pins.encode()).hexdigest()[:8]
    return f"node-{KUBERNETES_VERSION}-containerd-{CONTAINERD_VERSION}-{digest}"


def version_key() -> str:
    pins = "|".join((KUBERNETES_VERSION, STAGING_VERSION, ETCD_VERSION, KWOK_VERSION))
    digest = hashlib.sha256(pins.encode()).hexdigest()[:8]
    return f"k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}-kwok-{KWOK_VERSION}-{digest}"


def cache_root() -> Path:
    """`$DISTTRAIN_CACHE_DIR`, else `~/.cache/disttrain`: outside any checkout, so fresh clones reuse it."""
    configured = os.environ.get("DISTTRAIN_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "disttrain"


def cache_paths() -> CachePaths:
    return CachePaths(cache_root() / "devcluster" / version_key())


def node_cache_paths() -> CachePaths:
    return CachePaths(cache_root() / "devcluster" / node_version_key())
