"""The local cluster's real node with the project's images in its containerd, for tests that run them."""

from __future__ import annotations

import pytest

from disttrain_core.images import VERSION
from disttrain_dev import cluster as devcluster
from disttrain_dev import images, real_node
from support.repository import ROOT


def real_node_with_images() -> None:
    """Bring the real node up (or find it) and load both images; skips the test where this machine cannot run it."""
    missing = real_node.missing_requirement()
    if missing is not None:
        pytest.skip(missing)
    devcluster.up(real_node=True)
    devcluster.load_images([f"{name}:{VERSION}" for name in images.ensure_images(ROOT)])
