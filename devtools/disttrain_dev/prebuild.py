"""`python -m disttrain_dev.prebuild`, from the checkout's root: build ahead what CI's lint step and the test
command build in their set-up (helm, the peer, Kueue, Headlamp and its plugin's packages, the older supported
Kubernetes releases), so that CI runs
those builds beside README's first command, whose downloads and waits leave the CPU idle, rather than one
after another in the middle of the tests.

Each build holds its cache folder's lock (`build.ensure_built`): a test that needs one still under way waits
for it and then finds it done. A build that cannot run here (no source tarball) is said and left to its
test, which skips saying why; a build that fails is said, and its test builds again and fails with the
tool's own output. Nothing goes to stdout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from disttrain_core.api.kubernetes_version import KUBERNETES_VERSION, SUPPORTED_KUBERNETES
from disttrain_dev import headlamp, kueue, peer, versions
from disttrain_dev.build import ensure_binaries
from disttrain_dev.go_tools import HELM, KUBE_ROUTER


def _no_npm() -> str | None:
    return None if shutil.which("npm") else "npm is not installed"


BUILDS: tuple[tuple[str, Callable[[], object], Callable[[], str | None]], ...] = (
    ("helm", HELM.ensure, HELM.unavailable),
    ("the peer (training-operator)", peer.ensure_peer, lambda: None),  # needs only Go, which CI has
    ("Kueue", kueue.ensure_kueue, kueue.missing_source),
    ("Headlamp", headlamp.ensure_headlamp, headlamp.missing_requirement),
    ("the Headlamp plugin's packages", lambda: headlamp.plugin_packages(Path(headlamp.PLUGIN_FOLDER)), _no_npm),
    ("kube-router", KUBE_ROUTER.ensure, KUBE_ROUTER.unavailable),  # the real node's NetworkPolicy test
    # the older supported releases' control planes (test_kubernetes_versions.py), last: the first command
    # builds the default release's meanwhile
    *(
        (f"Kubernetes {release}", partial(ensure_binaries, versions.cache_paths(release)), lambda: None)
        for release in SUPPORTED_KUBERNETES
        if release != KUBERNETES_VERSION
    ),
)


def main() -> int:
    """Each build in turn; 1 if any failed."""
    failed = False
    for name, ensure, unavailable in BUILDS:
        problem = unavailable()
        if problem:
            print(f"prebuild: {name} is not built here: {problem}", file=sys.stderr, flush=True)
            continue
        started = time.monotonic()
        try:
            ensure()
        except (RuntimeError, OSError, subprocess.CalledProcessError) as error:
            print(f"prebuild: {name} failed: {error}", file=sys.stderr, flush=True)
            failed = True
            continue
        print(f"prebuild: {name} ready after {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
