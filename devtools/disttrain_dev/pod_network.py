"""Pod networking for the process node: a network namespace per pod, on one bridge, with its own hosts file.

Each pod gets an address of `10.250.0.0/17` on a veth pair whose host end sits on the bridge `dtbr0`
(`10.250.0.1`, also the node's address), so pods reach each other and this machine reaches every
pod, the operator's progress polls included; nothing is routed beyond the bridge. Names resolve
through `/etc/netns/<namespace>/hosts`, which `ip netns exec` mounts over `/etc/hosts`; it is
rewritten in place, so running processes see peers that start later. Needs root (CAP_NET_ADMIN).
"""

from __future__ import annotations

import ipaddress
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from disttrain_dev.process_pods import Mount

BRIDGE = "dtbr0"
NETWORK = ipaddress.ip_network("10.250.0.0/16")
GATEWAY = str(NETWORK.network_address + 1)
# The process node hands out the lower half; the real node's CNI plugin the upper half, on the same bridge.
PROCESS_POOL = ipaddress.ip_network("10.250.0.0/17")
CNI_POOL = ipaddress.ip_network("10.250.128.0/17")
NAMESPACE_PREFIX = "dtpod-"
HOST_LINK_PREFIX = "dtv"
NETNS_ETC = Path("/etc/netns")


class PodNetworkError(RuntimeError):
    pass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise PodNetworkError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def ensure_bridge() -> None:
    if _ip("link", "show", BRIDGE, check=False).returncode != 0:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{GATEWAY}/{NETWORK.prefixlen}", "dev", BRIDGE)
    _ip("link", "set", BRIDGE, "up")
    allow_forwarding(BRIDGE)


def allow_forwarding(bridge: str) -> None:
    """Let traffic between the pods of a bridge pass the FORWARD chain, once.

    A Docker engine sets the chain's policy to DROP and turns on bridge netfilter, which sends bridged
    traffic through that chain: pods on the same bridge could then no longer reach each other (seen: a
    MultiWorkerMirrored job Running for ten minutes, both workers stuck connecting). Docker's own rules
    only match its bridges, so a rule of ours at the top of FORWARD holds whether Docker starts before
    or after the node. Without iptables there is no such chain to pass."""
    if shutil.which("iptables") is None:
        return
    rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    if subprocess.run(["iptables", "-C", *rule], capture_output=True, check=False).returncode != 0:
        subprocess.run(["iptables", "-I", *rule], capture_output=True, text=True, check=True)


def namespace_name(key: str) -> str:
    return f"{NAMESPACE_PREFIX}{key}"


def add(key: str, address: str) -> str:
    """A namespace for one pod with `address`; returns its name. `key` is short and unique (of the pod's uid)."""
    namespace, host_end, pod_end = namespace_name(key), f"{HOST_LINK_PREFIX}{key}", f"dtp{key}"
    _ip("netns", "add", namespace)
    try:
        _ip("link", "add", host_end, "type", "veth", "peer", "name", pod_end)
        _ip("link", "set", pod_end, "netns", namespace)
        _ip("link", "set", host_end, "master", BRIDGE, "up")
        _ip("-n", namespace, "link", "set", pod_end, "name", "eth0")
        _ip("-n", namespace, "addr", "add", f"{address}/{NETWORK.prefixlen}", "dev", "eth0")
        _ip("-n", namespace, "link", "set", "eth0", "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "route", "add", "default", "via", GATEWAY)
    except PodNetworkError:
        remove(key)
        raise
    (NETNS_ETC / namespace).mkdir(parents=True, exist_ok=True)
    return namespace


def remove(key: str) -> None:
    namespace = namespace_name(key)
    _ip("link", "del", f"{HOST_LINK_PREFIX}{key}", check=False)
    _ip("netns", "del", namespace, check=False)
    subprocess.run(["rm", "-rf", str(NETNS_ETC / namespace)], check=False)


def remove_all() -> None:
    """What an earlier agent left behind (killed before it could clean up), and the bridge."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listed:
        name = line.split(" ", 1)[0]
        if name.startswith(NAMESPACE_PREFIX):
            remove(name.removeprefix(NAMESPACE_PREFIX))
    _ip("link", "del", BRIDGE, check=False)


def write_hosts(namespace: str, text: str) -> None:
    """In place (same inode): a bind-mounted file replaced by rename would keep its old content."""
    path = NETNS_ETC / namespace / "hosts"
    with path.open("w") as handle:
        handle.write(text)


def command_in(namespace: str, argv: Sequence[str], mounts: Sequence[Mount], working_dir: str | None) -> list[str]:
    """Run `argv` in the pod's namespace, with its volumes bind-mounted where the pod expects them.

    `ip netns exec` gives the process a mount namespace of its own, so the mounts stay private to it.
    """
    lines = ["set -e"]
    for mount in mounts:
        target = shlex.quote(mount.target)
        lines.append(f"mkdir -p {target} && mount --bind {shlex.quote(str(mount.source))} {target}")
    if working_dir:
        lines.append(f"mkdir -p {shlex.quote(working_dir)} && cd {shlex.quote(working_dir)}")
    lines.append('exec "$@"')
    return ["ip", "netns", "exec", namespace, "sh", "-c", "\n".join(lines), "sh", *argv]
