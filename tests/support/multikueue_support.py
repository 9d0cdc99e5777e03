"""Kueue's MultiKueue over control planes on this machine: named control planes beside the local cluster, and
docs/multi-cluster.md's blocks run against them as a user runs them (a worker's identity and kubeconfig, the
manager's Secrets and objects)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from disttrain_dev import cluster as devcluster
from disttrain_dev import readme
from disttrain_dev.versions import cache_paths
from support.kube_cluster import Cluster
from support.repository import ROOT

PAGE = ROOT / "docs" / "multi-cluster.md"
PAGE_NAMESPACE = "team-a"  # the namespace of the page's LocalQueue, a test's own in its place


@contextmanager
def control_plane(name: str, kubernetes: str | None = None) -> Iterator[Cluster]:
    """A second control plane of this name (kwok's fake nodes, no process node), of the `kubernetes` release
    (default the newest), until the block ends."""
    try:
        yield Cluster(devcluster.up(log=False, name=name, kubernetes=kubernetes))
    finally:
        devcluster.down(name)


def page_block(marker: str) -> str:
    return readme.block(marker, PAGE)


def run_page_block(marker: str, cluster: Cluster, folder: Path, namespace: str, **variables: str) -> None:
    """Run the page's shell block in `folder` (beside a link to deploy/) with `cluster` as kubectl's, the page's
    namespace replaced by `namespace`."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "deploy").exists():
        (folder / "deploy").symlink_to(ROOT / "deploy")
    kubectl = cache_paths().binary("kubectl")
    path = f"{kubectl.parent}:{os.environ.get('PATH', '')}"
    script = page_block(marker).replace(PAGE_NAMESPACE, namespace)
    env = {**cluster.env, "PATH": path, **variables}
    result = subprocess.run(
        [shutil.which("bash") or "bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"{marker} failed:\n{result.stdout}\n{result.stderr}"
