"""The Kubernetes releases disttrain supports: the one place the dev cluster, the docs, CI and the operator read.

Each supported minor is pinned at the newest patch the Go module proxy serves. The newest is the default:
the CRD embeds its PodTemplateSpec schema and the local cluster builds it unless asked for another.
"""

from __future__ import annotations

import re

SUPPORTED_KUBERNETES = ("v1.35.4", "v1.36.3", "v1.37.2")
KUBERNETES_VERSION = SUPPORTED_KUBERNETES[-1]

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def minor_of(version: str) -> tuple[int, int] | None:
    """`(1, 37)` from `v1.37.2`, `1.37` or a server's gitVersion `v1.37.2+k3s1`; None where it names none."""
    match = _VERSION.match(version.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


SUPPORTED_MINORS = tuple(minor for minor in map(minor_of, SUPPORTED_KUBERNETES) if minor is not None)


def supported_list() -> str:
    """The range in words, for every message that refuses a version."""
    return ", ".join(SUPPORTED_KUBERNETES)


def pinned_release(version: str) -> str:
    """The supported release `version` names (`1.35`, `v1.35`, `v1.35.4`); ValueError naming the range if none."""
    wanted = version.strip()
    for release in SUPPORTED_KUBERNETES:
        if wanted.lstrip("v") in (release.lstrip("v"), ".".join(release.lstrip("v").split(".")[:2])):
            return release
    raise ValueError(f"Kubernetes {wanted!r} is not supported: choose one of {supported_list()}")


# Container restart rules (`restartPolicyRules`, the action Restart): beta and on from 1.35.
CONTAINER_RESTART_RULES_SINCE = (1, 35)


def restarts_containers_on_rules(version: str) -> bool:
    """Whether a cluster of this version restarts a container in its pod on a `restartPolicyRules` rule; a
    version that names no minor is taken as the newest."""
    minor = minor_of(version)
    return minor is None or minor >= CONTAINER_RESTART_RULES_SINCE
