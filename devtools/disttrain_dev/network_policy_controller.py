"""A NetworkPolicy controller beside the real node, for the test that proves a job's policy is enforced:
kube-router's firewall alone (no routing, no service proxy), built from its Go module. It filters the
traffic to the pods whose host address is the real node's with iptables rules and ipsets; pods on one
bridge reach each other through iptables only where bridge netfilter passes bridged traffic there, so
its callers turn that on (`network_faults.bridged_traffic_through_iptables`).

Why this controller: kube-network-policies, the other one the module proxy serves, sends packets to
user space with nftables' `queue` statement, which this project's machines' kernels lack
(CONFIG_NFT_QUEUE is not set). The proxy serves kube-router v2.1.0 alone, for which security flaws are
reported; it runs on the development cluster for one test's span, never in what disttrain installs.

Its chains and sets are removed here after: v2.1.0's `--cleanup-config` reports the firewall cleaned and
leaves every rule (its clean-up has no iptables handle: 51 lines stayed after one test), then fails in the
service proxy's clean-up. Rules left behind would judge the next pod given a departed pod's address.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from disttrain.local.ports import free_port
from disttrain_dev import background, cluster, real_node
from disttrain_dev.go_tools import KUBE_ROUTER
from disttrain_dev.polling import wait_for

TOOLS = ("iptables", "ipset")
# The filter table's chains and the ipsets kube-router's firewall makes, by their names' prefixes.
CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-")
SET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")


def missing_requirement() -> str | None:
    """Why the controller cannot run here, or None."""
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"kube-router's firewall needs {tool} (apt-get install {tool})"
    return KUBE_ROUTER.unavailable()


def _healthy(port: int) -> bool:
    """kube-router answers 200 once its firewall has synced its rules and sent its first heartbeat."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def enforcing() -> Iterator[None]:
    """The running local cluster's NetworkPolicies enforced for the real node's pods while inside; the
    firewall's rules and sets removed after."""
    binary = str(KUBE_ROUTER.ensure())
    folder = cluster.state_dir()
    port = free_port()
    command = [
        binary,
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        f"--kubeconfig={cluster.kubeconfig_path(folder)}",
        f"--hostname-override={real_node.NODE_NAME}",
        f"--service-cluster-ip-range={cluster.SERVICE_CIDR}",
        f"--health-port={port}",
    ]
    log = folder / "logs" / "kube-router.log"
    remove_firewall()  # what an interrupted run left
    pid = background.start(log, command)
    try:
        try:
            wait_for("kube-router's firewall to sync", lambda: _healthy(port), 120)
        except TimeoutError as error:
            raise RuntimeError(f"{error}; the end of its log:\n{log.read_text()[-3000:]}") from error
        yield
    finally:
        background.stop(pid)
        remove_firewall()


def _run(*command: str) -> str:
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def remove_firewall() -> None:
    """The firewall's jumps from the built-in chains, its chains, then its sets (no rule refers to them)."""
    rules = _run("iptables-save", "-t", "filter").splitlines()
    chains = [line[1:].split()[0] for line in rules if line.startswith(":") and line[1:].startswith(CHAIN_PREFIXES)]
    for rule in (shlex.split(line) for line in rules if line.startswith("-A ")):
        jumps_to = rule[rule.index("-j") + 1] if "-j" in rule else None
        if rule[1] not in chains and jumps_to in chains:
            _run("iptables", "-w", "-t", "filter", "-D", *rule[1:])
    for action in ("-F", "-X"):
        for chain in chains:
            _run("iptables", "-w", "-t", "filter", action, chain)
    for name in _run("ipset", "list", "-n").split():
        if name.startswith(SET_PREFIXES):
            _run("ipset", "destroy", name)
