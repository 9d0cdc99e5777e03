"""The real node: a kubelet and containerd running the project's images, as on any cluster.

Beside the control plane run, as host processes: containerd 2 (with runc and Debian's CNI plugins),
the kubelet, kube-proxy (ClusterIP Services through iptables), CoreDNS (the cluster DNS: headless
Services resolve as TF_CONFIG needs, no hosts files) and local-path-provisioner (the default
StorageClass, as on kind). Pods get addresses of `10.250.128.0/17` on the bridge `dtbr0`, which
the process node shares; the API server listens on the bridge's address, so pods reach it through
the `kubernetes` Service. CoreDNS, kube-proxy and the provisioner use the admin kubeconfig; the
kubelet has a node identity of its own (`system:node:real-node`), and the API server reaches it
with a client certificate of the cluster's CA. Needs root.

containerd keeps its images under the cache (`realnode-containerd/`), so they outlive the cluster;
everything else lives in the cluster's state folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from disttrain_dev import images, node_build, node_kinds, pod_network, versions
from disttrain_dev.versions import CachePaths, cache_root

NODE_NAME = "real-node"
NODE_KIND_LABEL = node_kinds.NODE_KIND_LABEL
NODE_KIND = node_kinds.REAL
NODE_TOKEN = "disttrain-dev-real-node"
DNS_ADDRESS = pod_network.GATEWAY
CLUSTER_DOMAIN = "cluster.local"
STORAGE_CLASS = "local-path"
PROVISIONER = "rancher.io/local-path"
CNI_PLUGINS = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
COMPONENTS = ("containerd", "kubelet", "kube-proxy", "coredns", "local-path-provisioner")


@dataclass(frozen=True)
class NodeFiles:
    """Where the node's configuration and data live, inside the cluster's state folder."""

    folder: Path

    @property
    def root(self) -> Path:
        return self.folder / "real-node"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd.toml"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd.sock"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"

    @property
    def corefile(self) -> Path:
        return self.root / "Corefile"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def local_path_config(self) -> Path:
        return self.root / "local-path.json"

    @property
    def helper_pod(self) -> Path:
        return self.root / "helper-pod.yaml"


def missing_requirement() -> str | None:
    """Why this machine cannot run the real node, or None. The binaries themselves are built when missing."""
    if os.geteuid() != 0:
        return "the real node needs root (containers, network namespaces, iptables)"
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "info"], capture_output=True, check=False).returncode
    ):
        return "the real node loads its images from Docker, and no Docker engine answers"
    if not (CNI_PLUGINS / "bridge").is_file():
        return f"the CNI plugins are missing from {CNI_PLUGINS} (apt-get install containernetworking-plugins)"
    for tool in ("iptables", "conntrack"):
        if shutil.which(tool) is None:
            return f"kube-proxy needs {tool} (apt-get install {tool})"
    return build_requirement()


def build_requirement() -> str | None:
    """What building the node's binaries and images the first time needs and this machine lacks, or None; a
    machine that has them built needs nothing more."""
    if node_build.missing_node_binaries(versions.node_cache_paths()):
        for tool, package in (("go", "Go 1.26"), ("gcc", "gcc libc6-dev"), ("pkg-config", "pkg-config")):
            if shutil.which(tool) is None:
                return f"building the real node once needs {tool} (apt-get install {package})"
        if not Path(SECCOMP_HEADER).is_file():
            return "building the real node's runc once needs libseccomp (apt-get install libseccomp-dev)"
    if shutil.which("debootstrap") is None and not images.has_image(images.base_tag()):
        return "building the images' Python base once needs debootstrap (apt-get install debootstrap)"
    return None


SECCOMP_HEADER = "/usr/include/seccomp.h"


def containerd_state() -> Path:
    """Short, since shim sockets live under it; one real node per machine."""
    return Path("/run/disttrain-containerd")


def containerd_root() -> Path:
    return cache_root() / "realnode-containerd"


def containerd_config(files: NodeFiles, node: CachePaths) -> str:
    return f"""version = 3
root = {json.dumps(str(containerd_root()))}
state = {json.dumps(str(containerd_state()))}

[grpc]
  address = {json.dumps(str(files.containerd_socket))}

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = {json.dumps(versions.PAUSE_IMAGE)}

[plugins.'io.containerd.cri.v1.runtime']
  # root here lacks CAP_SYS_RESOURCE: containers may not lower their OOM score below containerd's
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = 'io.containerd.runc.v2'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = {json.dumps(str(node.binary("runc")))}
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [{json.dumps(str(CNI_PLUGINS))}]
    conf_dir = {json.dumps(str(files.cni_conf))}
"""


def cni_network(files: NodeFiles) -> dict[str, object]:
    """The bridge the process node uses too, with host-local addresses from the upper half of its network."""
    pool = pod_network.CNI_POOL
    ipam = {
        "type": "host-local",
        "dataDir": str(files.root / "cni-addresses"),
        "ranges": [
            [
                {
                    "subnet": str(pod_network.NETWORK),
                    "rangeStart": str(pool.network_address + 2),
                    "rangeEnd": str(pool.broadcast_address - 1),
                    "gateway": pod_network.GATEWAY,
                }
            ]
        ],
        "routes": [{"dst": "0.0.0.0/0"}],
    }
    bridge = {"type": "bridge", "bridge": pod_network.BRIDGE, "isGateway": True, "hairpinMode": True, "ipam": ipam}
    return {
        "cniVersion": "1.0.0",
        "name": "disttrain",
        "plugins": [bridge, {"type": "portmap", "capabilities": {"portMappings": True}}],
    }


def kubelet_config(files: NodeFiles, client_ca: Path, port: int) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": pod_network.GATEWAY,
        "port": port,
        "readOnlyPort": 0,
        "healthzPort": 0,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,  # these machines run cgroup v1 (hybrid)
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{files.containerd_socket}",
        "clusterDNS": [DNS_ADDRESS],
        "clusterDomain": CLUSTER_DOMAIN,
        "registerWithTaints": [node_kinds.taint(NODE_KIND)],
        # a development machine's disk and images are not the kubelet's to reclaim
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
    }


def corefile(admin_kubeconfig: Path) -> str:
    return f""".:53 {{
    bind {DNS_ADDRESS}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {admin_kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
}}
"""


SETUP_SCRIPT = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
TEARDOWN_SCRIPT = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'


def helper_pod(image: str) -> dict[str, object]:
    """The pod the provisioner runs on the node to make and remove a volume's folder (as root)."""
    toleration = {"key": NODE_KIND_LABEL, "operator": "Exists", "effect": "NoSchedule"}
    container = {"name": "helper-pod", "image": image, "imagePullPolicy": "Never"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {"tolerations": [toleration], "containers": [container]},
    }


def storage_objects() -> list[dict[str, object]]:
    """The default StorageClass, and the provisioner's ConfigMap (the helper pod mounts its scripts)."""
    storage_class: dict[str, object] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    config_map: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "local-path-config", "namespace": "kube-system"},
        "data": {"setup": SETUP_SCRIPT, "teardown": TEARDOWN_SCRIPT},  # the rest it reads from files
    }
    return [storage_class, config_map]


def write_configuration(
    files: NodeFiles,
    node: CachePaths,
    *,
    kubelet_kubeconfig: str,
    admin_kubeconfig: Path,
    client_ca: Path,
    kubelet_port: int,
    helper_image: str,
) -> None:
    files.root.mkdir(parents=True, exist_ok=True)
    files.cni_conf.mkdir(exist_ok=True)
    files.volumes.mkdir(exist_ok=True)
    files.containerd_config.write_text(containerd_config(files, node))
    (files.cni_conf / "10-disttrain.conflist").write_text(json.dumps(cni_network(files), indent=2) + "\n")
    files.kubelet_config.write_text(json.dumps(kubelet_config(files, client_ca, kubelet_port), indent=2) + "\n")
    files.kubelet_kubeconfig.write_text(kubelet_kubeconfig)
    files.corefile.write_text(corefile(admin_kubeconfig))
    # Only this node is listed: the provisioner refuses claims of other (fake) nodes, which kwok binds.
    files.local_path_config.write_text(
        json.dumps({"nodePathMap": [{"node": NODE_NAME, "paths": [str(files.volumes)]}]})
    )
    files.helper_pod.write_text(json.dumps(helper_pod(helper_image)))


def mount_kubelet_root(files: NodeFiles) -> None:
    """The kubelet's root folder as a shared mount of its own, with a tmpfs under its pod-resources folder.

    The kubelet makes its pod-resources socket under a temporary name and renames it; on an overlay
    filesystem that rename can fail with EXDEV, and the kubelet exits (seen in CI, and in k3s's:
    https://github.com/k3s-io/k3s/issues/4042), hence the tmpfs. The kubelet also bind-mounts its root onto
    itself, without the mounts under it, when the root is not on a shared mount; it does so while it makes
    that socket, and the rename then fails with ENOENT (seen in CI). A root already shared is left as it is.
    `dev-cluster down` unmounts both."""
    root = str(files.kubelet_root)
    files.kubelet_root.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(root):
        subprocess.run(["mount", "--bind", root, root], check=True)
        subprocess.run(["mount", "--make-rshared", root], check=True)
    folder = files.kubelet_root / "pod-resources"
    folder.mkdir(exist_ok=True)
    if not os.path.ismount(folder):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0750", "tmpfs", str(folder)], check=True)


def commands(files: NodeFiles, node: CachePaths, admin_kubeconfig: Path, ports: dict[str, int]) -> dict[str, list[str]]:
    kubeconfig = str(admin_kubeconfig)
    return {
        "containerd": [str(node.binary("containerd")), f"--config={files.containerd_config}"],
        "kubelet": [
            str(node.binary("kubelet")),
            f"--config={files.kubelet_config}",
            f"--kubeconfig={files.kubelet_kubeconfig}",
            f"--root-dir={files.kubelet_root}",
            f"--cert-dir={files.root / 'kubelet-certs'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={pod_network.GATEWAY}",  # the kubelet refuses a loopback node address
            f"--node-labels={NODE_KIND_LABEL}={NODE_KIND}",
        ],
        "kube-proxy": [
            str(node.binary("kube-proxy")),
            f"--kubeconfig={kubeconfig}",
            f"--hostname-override={NODE_NAME}",
            "--proxy-mode=iptables",
            f"--cluster-cidr={pod_network.NETWORK}",
            "--conntrack-max-per-core=0",  # leave the machine's conntrack table as it is
            f"--healthz-bind-address=127.0.0.1:{ports['proxy_healthz']}",
            f"--metrics-bind-address=127.0.0.1:{ports['proxy_metrics']}",
        ],
        "coredns": [str(node.binary("coredns")), "-conf", str(files.corefile)],
        "local-path-provisioner": [
            str(node.binary("local-path-provisioner")),
            "start",
            f"--kubeconfig={kubeconfig}",
            f"--config={files.local_path_config}",
            f"--helper-pod-file={files.helper_pod}",
            f"--provisioner-name={PROVISIONER}",
            "--namespace=kube-system",
            "--configmap-name=local-path-config",
            "--service-account-name=default",
            "--helper-image=unused",  # the helper pod file names its image
        ],
    }
