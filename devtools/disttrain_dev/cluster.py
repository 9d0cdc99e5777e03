"""A real Kubernetes control plane as local processes: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok with fake GPU nodes. For development and CI; the operator never needs it.

Each process runs in its own session, so the cluster outlives the command that started it; its pids,
ports, logs and kubeconfig live in one state folder that `down` removes.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from disttrain.local.ports import free_port
from disttrain_core.api import crd
from disttrain_core.api import job as api
from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, pinned_release
from disttrain_dev import (
    background,
    containerd,
    images,
    kwok_stages,
    local_operator,
    node_build,
    node_kinds,
    pki,
    pod_network,
    real_node,
    versions,
)
from disttrain_dev.build import ensure_binaries
from disttrain_dev.polling import wait_for
from disttrain_dev.versions import CachePaths, cache_root

ADMIN_TOKEN = "disttrain-dev-admin"
OWN_KWOK_STAGES = "kwok-stages"  # the project's own: kwok_stages.py
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
FAKE_POD_CIDR = "127.244.0.1/16"  # kwok's pods: loopback, see the kwok arguments


NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$")


def state_dir(name: str | None = None) -> Path:
    """The local cluster's folder; a named control plane's lies beside it (`cluster-<name>`)."""
    configured = os.environ.get("DISTTRAIN_DEVCLUSTER_DIR")
    folder = Path(configured) if configured else cache_root() / "cluster"
    if name is None:
        return folder
    if not NAME_PATTERN.match(name):
        raise RuntimeError(f"{name!r} is not a control plane's name: lower-case letters, digits and '-'")
    return folder.with_name(f"{folder.name}-{name}")


@dataclass(frozen=True)
class ClusterState:
    etcd_port: int
    etcd_peer_port: int
    apiserver_port: int
    pids: dict[str, int]
    # The API server's address: loopback, or the pod bridge's where a real node's pods must reach it.
    address: str = "127.0.0.1"
    node_ports: dict[str, int] = field(default_factory=dict)
    kubernetes: str = ""  # the release it runs; empty in a state folder written before versions were chosen

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.apiserver_port}"


@dataclass(frozen=True)
class NodeShape:
    """Capacity of each fake node: enough for the examples, GPUs included."""

    count: int = 4
    cpu: str = "64"
    memory: str = "512Gi"
    gpus: int = 8
    pods: int = 110


def kubeconfig_path(folder: Path | None = None) -> Path:
    return (folder or state_dir()) / "kubeconfig"


def kubeconfig_text(folder: Path, state: ClusterState, user: str, token: str) -> str:
    """Credentials of a static token; the CA is the API server's self-signed certificate, valid for its address."""
    ca = folder / "certs" / "apiserver.crt"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "disttrain-dev", "cluster": {"server": state.server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "disttrain-dev", "context": {"cluster": "disttrain-dev", "user": user}}],
        "current-context": "disttrain-dev",
    }
    return json.dumps(config, indent=2) + "\n"


def _write_kubeconfig(folder: Path, state: ClusterState) -> Path:
    path = kubeconfig_path(folder)
    path.write_text(kubeconfig_text(folder, state, "admin", ADMIN_TOKEN))
    return path


def _ready(state: ClusterState) -> bool:
    request = urllib.request.Request(f"{state.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=2, context=context) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _load_state(folder: Path) -> ClusterState | None:
    path = folder / "state.json"
    if not path.is_file():
        return None
    return ClusterState(**json.loads(path.read_text()))


def running_state(folder: Path | None = None) -> ClusterState | None:
    """The cluster of this state folder if every process is alive and the API server answers."""
    state = _load_state(folder or state_dir())
    if state is None or not all(background.alive(pid) for pid in state.pids.values()):
        return None
    return state if _ready(state) else None


def require_running(folder: Path | None = None) -> ClusterState:
    """The running cluster of this state folder; a RuntimeError that says how to start it where none runs."""
    state = running_state(folder)
    if state is None:
        raise RuntimeError("the local cluster is not running; start it with `disttrain dev-cluster up`")
    return state


def compact_etcd(folder: Path | None = None) -> int:
    """Compact etcd's history up to its current revision, as the API server's own compaction does every
    5 minutes; the revision. Through etcd's JSON gateway: no etcdctl is built."""
    state = require_running(folder)

    def call(method: str, body: dict[str, Any]) -> dict[str, Any]:
        url = f"http://127.0.0.1:{state.etcd_port}/v3/kv/{method}"
        request = urllib.request.Request(url, json.dumps(body).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer

    revision = int(call("range", {"key": "Lw=="})["header"]["revision"])  # any key: the header has the revision
    call("compaction", {"revision": str(revision), "physical": True})
    return revision


def _start(folder: Path, name: str, command: list[str], env: dict[str, str] | None = None) -> int:
    return background.start(folder / "logs" / f"{name}.log", command, env, cwd=folder)


def _kubectl(paths: CachePaths, folder: Path, *args: str, stdin: str | None = None) -> str:
    command = [str(paths.binary("kubectl")), "--kubeconfig", str(kubeconfig_path(folder)), *args]
    result = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()[:1000]}")
    return result.stdout


def fake_node(name: str, shape: NodeShape) -> dict[str, object]:
    capacity = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods), GPU_RESOURCE: str(shape.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


# Kubernetes' own gang scheduling (off by default on every supported minor): the Workload API, and
# kube-scheduler's gang and topology plugins, which its default profile adds once their gates are on.
def _feature_gates(kubernetes: str) -> str:
    gates = versions.control_plane_flags(kubernetes).feature_gates
    return "--feature-gates=" + ",".join(f"{gate}=true" for gate in gates)


def _version_flags(kubernetes: str, address: str) -> list[str]:
    """The API server's flags of this minor: its gates, its Workload API, and on 1.37 with a loopback
    address no endpoint reconciler (only a real node's pods, on the pod bridge, use the `kubernetes` Service)."""
    flags = versions.control_plane_flags(kubernetes)
    loopback = address.startswith("127.")
    endpoints = ["--endpoint-reconciler-type=none"] if loopback and flags.loopback_without_endpoints else []
    return [_feature_gates(kubernetes), f"--runtime-config={flags.workload_api}=true", *endpoints]


# What every ServiceAccount outside the cluster's own add-ons asks of the API server (not what it sends),
# and whether RBAC allowed it: the tests read the installed operator's refusals there.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system", "system:serviceaccounts:local-path-storage"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
"""


def audit_logs(folder: Path | None = None) -> list[Path]:
    """The API server's audit log of ServiceAccounts' requests, oldest file first (it rotates at 200 MB)."""
    return sorted((folder or state_dir()).joinpath("audit").glob("audit*.log"), key=lambda path: path.stat().st_mtime)


def _kwok_stages(paths: CachePaths, folder: Path) -> list[Path]:
    """kwok's stages, those the project replaces (kwok_stages.py) taken from the cluster's folder."""
    own = sorted((folder / OWN_KWOK_STAGES).glob("*.yaml"))
    replaced = {stage.name for stage in own}
    return [stage for stage in sorted(paths.kwok_stages.glob("*.yaml")) if stage.name not in replaced] + own


def _apiserver_command(paths: CachePaths, folder: Path, state: ClusterState) -> list[str]:
    key = folder / "service-account.key"
    return [
        str(paths.binary("kube-apiserver")),
        f"--etcd-servers=http://127.0.0.1:{state.etcd_port}",
        f"--cert-dir={folder / 'certs'}",
        f"--bind-address={state.address}",
        f"--advertise-address={state.address}",
        f"--kubelet-client-certificate={folder / 'pki' / pki.CLIENT}.crt",
        f"--kubelet-client-key={folder / 'pki' / pki.CLIENT}.key",
        f"--secure-port={state.apiserver_port}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        f"--token-auth-file={folder / 'tokens.csv'}",
        f"--service-account-key-file={key}",
        f"--service-account-signing-key-file={key}",
        "--service-account-issuer=https://kubernetes.default.svc",
        "--enable-priority-and-fairness=false",
        f"--audit-policy-file={folder / 'audit-policy.yaml'}",
        f"--audit-log-path={folder / 'audit' / 'audit.log'}",
        "--audit-log-format=json",
        # Each request waits for its line: a batch drops events once its buffer is full, and the tests
        # hold the rules to what the log shows. Only ServiceAccounts' requests are written (AUDIT_POLICY).
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=200",
        "--audit-log-maxbackup=5",
        # Namespaces annotated for the process node send their pods there (see process_namespace).
        "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
        "--kubelet-preferred-address-types=InternalIP,Hostname",  # node names resolve nowhere
        *_version_flags(paths.kubernetes, state.address),
    ]


def _commands(paths: CachePaths, folder: Path, state: ClusterState) -> dict[str, list[str]]:
    kubeconfig = str(kubeconfig_path(folder))
    key = str(folder / "service-account.key")
    return {
        "etcd": [
            str(paths.binary("etcd")),
            f"--data-dir={folder / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{state.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{state.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{state.etcd_peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{state.etcd_peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{state.etcd_peer_port}",
            "--unsafe-no-fsync",
        ],
        "kube-apiserver": _apiserver_command(paths, folder, state),
        "kube-controller-manager": [
            str(paths.binary("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            f"--service-account-private-key-file={key}",
            f"--root-ca-file={folder / 'certs' / 'apiserver.crt'}",  # what pods trust, in kube-root-ca.crt
            f"--cluster-cidr={POD_CIDR}",
            "--controllers=*",
            _feature_gates(paths.kubernetes),
        ],
        "kube-scheduler": [
            str(paths.binary("kube-scheduler")),
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--secure-port=0",
            _feature_gates(paths.kubernetes),
        ],
        "kwok": [
            str(paths.binary("kwok")),
            f"--kubeconfig={kubeconfig}",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            # Fake pods and nodes get loopback addresses: whatever connects to them (the operator's
            # progress poll) stays on this machine instead of leaving through its default route.
            f"--cidr={FAKE_POD_CIDR}",
            "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",
            f"--config={folder / 'kwok.yaml'}",
            *(f"--config={stage}" for stage in _kwok_stages(paths, folder)),
        ],
    }


# Pods annotated so are left alone by kwok, as by a kubelet that stopped answering: tests use it to
# leave a pod Terminating, as on a lost node.
UNATTENDED_ANNOTATION = "kwok.x-k8s.io/status=custom"
KWOK_CONFIGURATION = f"""apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  disregardStatusWithAnnotationSelector: {UNATTENDED_ANNOTATION}
  # kwok does not default the options of a configuration file: its defaults, spelled out
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
"""


def _prepare(paths: CachePaths, folder: Path) -> None:
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    kwok_stages.write_local_path_stages(paths.kwok_stages, folder / OWN_KWOK_STAGES)
    kwok_stages.write_pod_delete_stage(paths.kwok_stages, folder / OWN_KWOK_STAGES)
    (folder / "kwok.yaml").write_text(KWOK_CONFIGURATION)
    (folder / "audit-policy.yaml").write_text(AUDIT_POLICY)
    (folder / "audit").mkdir(exist_ok=True)
    node = f"system:node:{real_node.NODE_NAME}"
    (folder / "tokens.csv").write_text(
        f"{ADMIN_TOKEN},disttrain-admin,disttrain-admin,system:masters\n"
        f'{real_node.NODE_TOKEN},{node},{node},"system:nodes"\n'
    )
    key = folder / "service-account.key"
    if not key.exists():
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
    pki.make_kubelet_client_certificate(folder / "pki")


def up(
    shape: NodeShape | None = None,
    log: bool = True,
    *,
    process_node: bool = False,
    real_node: bool = False,
    name: str | None = None,
    kubernetes: str | None = None,
) -> Path:
    """Start the cluster (or find it running) and return its kubeconfig path.

    `process_node` adds the node whose pods run as real processes (`process_node`), and the
    namespace `local`, whose pods go there; `real_node` adds a kubelet and containerd node
    (`real_node`). A running cluster whose API server pods cannot reach is started anew for one.
    `name` starts a second control plane of that name beside the local cluster (MultiKueue's manager
    or another worker): its own etcd, API server, controllers and kwok's fake nodes. The process and
    real nodes hold this machine's pod network, so they belong to the unnamed cluster alone.
    `kubernetes` chooses a supported release (`1.35`, `v1.36.3`; default the newest); a cluster running
    another is started anew. The real node runs the default release only: its binaries are built for it.
    """
    release = KUBERNETES_VERSION if kubernetes is None else pinned_release(kubernetes)
    if name is not None and (process_node or real_node):
        raise RuntimeError(
            "a named control plane has kwok's fake nodes only: the process and real nodes are the local cluster's"
        )
    if real_node and release != KUBERNETES_VERSION:
        raise RuntimeError(f"the real node runs Kubernetes {KUBERNETES_VERSION} only, not {release}")
    folder = state_dir(name)
    running = running_state(folder)
    if running is not None and running.kubernetes != release:
        print(
            f"restarting the cluster: it runs Kubernetes {running.kubernetes or 'of an older checkout'}, not {release}",
            file=sys.stderr,
        )
        running = None
    if running is not None and real_node and running.address != pod_network.GATEWAY:
        print("restarting the local cluster: a real node's pods need the API server on the pod bridge", file=sys.stderr)
        running = None
    if running is not None:
        paths = ensure_binaries(versions.cache_paths(release))
        _install_crd(paths, folder)  # a running cluster gets the CRD of this checkout
        if process_node and PROCESS_NODE not in running.pids:
            running = _start_process_node(paths, folder, running)
        if real_node and "kubelet" not in running.pids:
            _start_real_node(paths, folder, running)
        return kubeconfig_path(folder)
    down(name)
    started = time.monotonic()
    _start_cluster(folder, name, shape or NodeShape(), release, process_node=process_node, real_node=real_node)
    if log:
        what = "local cluster" if name is None else f"control plane {name}"
        print(
            f"{what} (Kubernetes {release}) up in {time.monotonic() - started:.1f}s, logs in {folder / 'logs'}",
            file=sys.stderr,
        )
    return kubeconfig_path(folder)


def _start_cluster(
    folder: Path, name: str | None, shape: NodeShape, release: str, *, process_node: bool, real_node: bool
) -> None:
    """Start every component in the (empty) state folder, in order, each once the one before answers; on
    any failure, stop what started and raise with the tail of every component's log."""
    paths = ensure_binaries(versions.cache_paths(release))
    node_paths = _real_node_binaries() if real_node else None  # a machine that cannot run one says so first
    _prepare(paths, folder)
    address = "127.0.0.1"
    if real_node:
        pod_network.ensure_bridge()
        address = pod_network.GATEWAY
    state = ClusterState(free_port(), free_port(), free_port(), pids={}, address=address, kubernetes=release)
    commands = _commands(paths, folder, state)
    pids: dict[str, int] = {}
    try:
        pids["etcd"] = _start(folder, "etcd", commands["etcd"])
        pids["kube-apiserver"] = _start(folder, "kube-apiserver", commands["kube-apiserver"])
        state = replace(state, pids=pids)
        _save_state(folder, state)
        wait_for("kube-apiserver /readyz", lambda: _ready(state), 90)
        _write_kubeconfig(folder, state)
        for component in ("kube-controller-manager", "kube-scheduler", "kwok"):
            pids[component] = _start(folder, component, commands[component])
        state = replace(state, pids=pids)
        _save_state(folder, state)
        _install(paths, folder, shape)
        if process_node:
            state = _start_process_node(paths, folder, state)
        if node_paths is not None:
            _start_real_node(paths, folder, state)
    except Exception as error:
        tails = _log_tails(folder)
        down(name)
        raise RuntimeError(f"the local cluster did not come up: {error}\n{tails}") from error


PROCESS_NODE = "process-node"
LOCAL_NAMESPACE = "local"


def node_namespace(name: str, kind: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    """A namespace whose pods all run on the node of `kind` (process, real): the API server adds the
    selector and toleration to each pod, so manifests need no change."""
    toleration = {**node_kinds.taint(kind), "operator": "Equal"}
    annotations = {
        "scheduler.alpha.kubernetes.io/node-selector": f"{node_kinds.NODE_KIND_LABEL}={kind}",
        "scheduler.alpha.kubernetes.io/defaultTolerations": json.dumps([toleration]),
    }
    metadata = {"name": name, "annotations": annotations, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def process_namespace(name: str) -> dict[str, object]:
    return node_namespace(name, node_kinds.PROCESS)


def node_kind_running(state: ClusterState) -> str:
    """The node that namespaces send their pods to when none is named: the real node where it runs (it runs
    the images users run), else the process node."""
    if "kubelet" in state.pids:
        return node_kinds.REAL
    if PROCESS_NODE in state.pids:
        return node_kinds.PROCESS
    raise RuntimeError(
        "the local cluster runs neither the real node nor the process node: "
        "`disttrain dev-cluster up --real-node` or `--process-node` adds one"
    )


def apply_namespaces(names: list[str], kind: str | None = None) -> str:
    """Create (or annotate) namespaces whose pods run on the node of `kind` (by default, the one the cluster
    runs: `node_kind_running`); that kind. One still being deleted (the namespace controller takes 5 s or
    more) is waited for first: nothing could be made in it."""
    folder = state_dir()
    state = require_running(folder)
    paths = ensure_binaries(versions.cache_paths(state.kubernetes))
    kind = kind or node_kind_running(state)
    listed = json.loads(_kubectl(paths, folder, "get", "namespaces", "-o", "json"))["items"]
    going = [
        f"namespace/{item['metadata']['name']}"
        for item in listed
        if item["metadata"]["name"] in names and item["metadata"].get("deletionTimestamp")
    ]
    if going:
        _kubectl(paths, folder, "wait", "--for=delete", *going, "--timeout=180s")
    items = [node_namespace(name, kind) for name in names]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    # a field manager of its own: a later `kubectl apply --server-side` of the same namespace keeps these
    manager = "--field-manager=disttrain-dev-cluster"
    _kubectl(paths, folder, "apply", "--server-side", manager, "-f", "-", stdin=listing)
    return kind


def _start_process_node(paths: CachePaths, folder: Path, state: ClusterState) -> ClusterState:
    from disttrain_dev.process_node import NODE_NAME  # noqa: PLC0415

    command = [sys.executable, "-m", "disttrain_dev.process_node", f"--state={folder / PROCESS_NODE}"]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path(folder))}
    state = replace(state, pids={**state.pids, PROCESS_NODE: _start(folder, PROCESS_NODE, command, env)})
    _save_state(folder, state)
    wait_for("the process node", lambda: _node_ready(paths, folder, NODE_NAME), 60)
    _kubectl(paths, folder, "apply", "-f", "-", stdin=json.dumps(process_namespace(LOCAL_NAMESPACE)))
    return state


def _node_ready(paths: CachePaths, folder: Path, name: str) -> bool:
    try:
        node = json.loads(_kubectl(paths, folder, "get", "node", name, "-o", "json"))
    except RuntimeError:
        return False
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _real_node_binaries() -> CachePaths:
    """What the real node needs of this machine, checked, then its binaries (built once)."""
    missing = real_node.missing_requirement()
    if missing is not None:
        raise RuntimeError(missing)
    return node_build.ensure_node_binaries()


def _start_real_node(paths: CachePaths, folder: Path, state: ClusterState) -> ClusterState:
    """containerd, then the kubelet, kube-proxy, CoreDNS and the volume provisioner; waits for the Node."""
    node = _real_node_binaries()
    files = real_node.NodeFiles(folder)
    ports = {"kubelet": free_port(), "proxy_healthz": free_port(), "proxy_metrics": free_port()}
    state = replace(state, node_ports=ports)
    node_kubeconfig = kubeconfig_text(folder, state, f"system:node:{real_node.NODE_NAME}", real_node.NODE_TOKEN)
    helper_image = images.ensure_base()
    real_node.write_configuration(
        files,
        node,
        kubelet_kubeconfig=node_kubeconfig,
        admin_kubeconfig=kubeconfig_path(folder),
        client_ca=folder / "pki" / f"{pki.CA}.crt",
        kubelet_port=ports["kubelet"],
        helper_image=helper_image,
    )
    commands = real_node.commands(files, node, kubeconfig_path(folder), ports)
    pids = dict(state.pids)
    pids["containerd"] = _start(folder, "containerd", commands["containerd"], _node_environment(node))
    state = replace(state, pids=pids)
    _save_state(folder, state)
    real_node.mount_kubelet_root(files)
    wait_for("containerd", lambda: containerd.ctr(files, node, "version", check=False).returncode == 0, 60)
    containerd.load_images(files, node, [containerd.ensure_pause_image(node), helper_image])
    objects = real_node.storage_objects()
    _kubectl(
        paths,
        folder,
        "apply",
        "--server-side",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )
    not_default = {"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "false"}}}
    _kubectl(paths, folder, "patch", "storageclass", "kwok-volume", "-p", json.dumps(not_default))
    for name in real_node.COMPONENTS[1:]:
        pids[name] = _start(folder, name, commands[name], _node_environment(node))
    state = replace(state, pids=pids)
    _save_state(folder, state)
    wait_for("the real node", lambda: _node_ready(paths, folder, real_node.NODE_NAME), 120)
    return state


def _node_environment(node: CachePaths) -> dict[str, str]:
    """containerd finds its shim, and the kubelet and kube-proxy their tools, on PATH."""
    return {**os.environ, "PATH": f"{node.bin}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"}


def restart_component(name: str, pause: float = 0, folder: Path | None = None) -> None:
    """Stop one component of the running cluster (or of the control plane of `folder`) and start it again with
    the same arguments (fault tests)."""
    folder = folder or state_dir()
    state = _load_state(folder)
    if state is None:
        raise RuntimeError("no local cluster is running")
    background.stop(state.pids[name])
    time.sleep(pause)
    if name in real_node.COMPONENTS:
        node = node_build.ensure_node_binaries()
        command = real_node.commands(real_node.NodeFiles(folder), node, kubeconfig_path(folder), state.node_ports)[name]
        state.pids[name] = _start(folder, name, command, _node_environment(node))
    else:
        paths = ensure_binaries(versions.cache_paths(state.kubernetes))
        state.pids[name] = _start(folder, name, _commands(paths, folder, state)[name])
    _save_state(folder, state)
    if name == "kube-apiserver":
        wait_for("kube-apiserver /readyz", lambda: _ready(state), 90)


def _log_tails(folder: Path, lines: int = 15) -> str:
    """The last lines of every component's log: what a failed start leaves to read once it is cleaned up."""
    tails = []
    for log in sorted((folder / "logs").glob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.name}\n" + "\n".join(text))
    return "\n".join(tails)


def _save_state(folder: Path, state: ClusterState) -> None:
    (folder / "state.json").write_text(json.dumps(asdict(state)) + "\n")


def _install(paths: CachePaths, folder: Path, shape: NodeShape) -> None:
    nodes = [fake_node(f"gpu-node-{index}", shape) for index in range(shape.count)]
    _kubectl(paths, folder, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    _kubectl(paths, folder, "apply", "-f", str(paths.kwok_storage_class))
    _install_crd(paths, folder)
    wait_for("the default ServiceAccount", lambda: _has_default_service_account(paths, folder), 60)
    _kubectl(paths, folder, "wait", "--for=condition=Ready", "--timeout=60s", "nodes", "--all")


def _install_crd(paths: CachePaths, folder: Path) -> None:
    _kubectl(paths, folder, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=crd.render_crd())
    wait_for("the CRD to be established", lambda: _crd_established(paths, folder), 60)


def _crd_established(paths: CachePaths, folder: Path) -> bool:
    """Polled rather than `kubectl wait`, which fails on a CRD whose status has no conditions yet."""
    return crd_established(json.loads(_kubectl(paths, folder, "get", "crd", f"{api.PLURAL}.{api.GROUP}", "-o", "json")))


def crd_established(definition: dict[str, Any]) -> bool:
    """A CRD just created has no status, or a status without conditions, until the API server takes it up."""
    conditions = (definition.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _has_default_service_account(paths: CachePaths, folder: Path) -> bool:
    try:
        _kubectl(paths, folder, "get", "serviceaccount", "default", "-n", "default")
    except RuntimeError:
        return False
    return True


def down(name: str | None = None) -> None:
    """Stop every process this state folder (the local cluster's, or a named control plane's) started and remove
    the folder."""
    folder = state_dir(name)
    local_operator.stop(folder)
    state = _load_state(folder)
    if state is not None:
        for component, pid in reversed(list(state.pids.items())):
            if component == "containerd":  # the kubelet is stopped by now, so nothing starts them again
                containerd.stop_containers(real_node.NodeFiles(folder), versions.node_cache_paths())
            background.stop(pid)
            if component == "containerd":
                containerd.stop_shims(real_node.NodeFiles(folder))
    _unmount_under(folder)
    if folder.exists():
        subprocess.run(["rm", "-rf", str(folder)], check=True)


def _unmount_under(folder: Path, rounds: int = 5) -> None:
    """Whatever the kubelet or containerd left mounted in the folder: `rm -rf` must not reach through a mount.

    In rounds, until none is left: the kubelet's root folder is bind-mounted onto itself and shared, so a mount
    under it (the pod-resources tmpfs) can show twice, and one beneath shows again once the one above is gone."""
    prefixes = (f"{folder.resolve()}/", f"{real_node.containerd_state()}/")
    for _ in range(rounds):
        mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
        under = sorted((m for m in mounts if m.startswith(prefixes)), key=len, reverse=True)
        if not under:
            return
        for target in under:
            subprocess.run(["umount", "-l", target], capture_output=True, check=False)


def load_images(tags: list[str]) -> None:
    """Copy Docker images into the real node's containerd (as `kind load docker-image` does)."""
    state = running_state()
    if state is None or "containerd" not in state.pids:
        raise RuntimeError("no real node is running; start one with `disttrain dev-cluster up --real-node`")
    copied = containerd.load_images(real_node.NodeFiles(state_dir()), versions.node_cache_paths(), tags)
    for tag in tags:
        print(f"{tag}: {'loaded' if tag in copied else 'already on the node'}", file=sys.stderr)


def start_operator() -> str:
    """The operator in the background for every namespace of the running local cluster (found running, or
    started); what it is and where it logs."""
    folder = state_dir()
    require_running(folder)
    started = local_operator.start(folder, kubeconfig_path(folder))
    log = folder / local_operator.LOG
    return f"the operator runs (pid {started.pid}) until `disttrain dev-cluster down`; its log: {log}"
