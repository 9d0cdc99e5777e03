"""Pinned versions of the local control plane, and where their binaries are cached.

The cache key is the full set of versions, so bumping one pin rebuilds instead of reusing a stale
binary, and a warm machine finds every binary it needs without touching the network.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, minor_of

ETCD_VERSION = "v3.6.10"
KWOK_VERSION = "v0.8.0"


@dataclass(frozen=True)
class ControlPlaneFlags:
    """What one minor's control plane is started with so that its Workload API (gangs) is served."""

    feature_gates: tuple[str, ...]
    workload_api: str  # the scheduling.k8s.io version turned on through --runtime-config
    # 1.37's API server refuses to advertise a loopback address with the default endpoint reconciler.
    loopback_without_endpoints: bool = False


CONTROL_PLANE_FLAGS = {
    (1, 35): ControlPlaneFlags(("GenericWorkload", "GangScheduling"), "scheduling.k8s.io/v1alpha1"),
    (1, 36): ControlPlaneFlags(
        ("GenericWorkload", "GangScheduling", "TopologyAwareWorkloadScheduling"), "scheduling.k8s.io/v1alpha2"
    ),
    (1, 37): ControlPlaneFlags(
        ("GenericWorkload", "TopologyAwareWorkloadScheduling"),
        "scheduling.k8s.io/v1beta1",
        loopback_without_endpoints=True,
    ),
}


def control_plane_flags(kubernetes: str) -> ControlPlaneFlags:
    minor = minor_of(kubernetes)
    if minor not in CONTROL_PLANE_FLAGS:
        raise RuntimeError(f"no control-plane flags are known for Kubernetes {kubernetes}")
    return CONTROL_PLANE_FLAGS[minor]


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

SERVER_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KUBERNETES_COMMANDS = (*SERVER_COMMANDS, "kubectl")
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
    kubernetes: str = KUBERNETES_VERSION

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
        """An older release's plane runs its own server commands and the default release's kubectl, etcd and
        kwok, whose pins are one whatever the release (the tests' kubectl is the default's for every plane)."""
        if self.kubernetes == KUBERNETES_VERSION or name in SERVER_COMMANDS:
            return self.bin / name
        return cache_paths().binary(name)

    @property
    def own_binaries(self) -> tuple[str, ...]:
        """What this release's folder builds: every binary for the default release, the servers for another."""
        return ALL_BINARIES if self.kubernetes == KUBERNETES_VERSION else SERVER_COMMANDS


def staging_version(kubernetes: str) -> str:
    """The staging modules' release that ships with a Kubernetes release: k8s.io/api v0.37.2 with v1.37.2."""
    return "v0" + kubernetes.removeprefix("v1")


def node_version_key() -> str:
    pins = "|".join((KUBERNETES_VERSION, CONTAINERD_VERSION, RUNC_VERSION, COREDNS_VERSION, LOCAL_PATH_VERSION))
    digest = hashlib.sha256(pins.encode()).hexdigest()[:8]
    return f"node-{KUBERNETES_VERSION}-containerd-{CONTAINERD_VERSION}-{digest}"


def version_key(kubernetes: str = KUBERNETES_VERSION) -> str:
    pins = "|".join((kubernetes, staging_version(kubernetes), ETCD_VERSION, KWOK_VERSION))
    digest = hashlib.sha256(pins.encode()).hexdigest()[:8]
    return f"k8s-{kubernetes}-etcd-{ETCD_VERSION}-kwok-{KWOK_VERSION}-{digest}"


def cache_root() -> Path:
    """`$DISTTRAIN_CACHE_DIR`, else `~/.cache/disttrain`: outside any checkout, so fresh clones reuse it."""
    configured = os.environ.get("DISTTRAIN_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "disttrain"


def cache_paths(kubernetes: str = KUBERNETES_VERSION) -> CachePaths:
    """The binaries of one Kubernetes release (each supported one is cached apart)."""
    return CachePaths(cache_root() / "devcluster" / version_key(kubernetes), kubernetes)


def node_cache_paths() -> CachePaths:
    return CachePaths(cache_root() / "devcluster" / node_version_key())
