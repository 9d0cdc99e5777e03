"""The images a release of disttrain publishes, tagged with its version: what a job runs when it names no other."""

from __future__ import annotations

from importlib import metadata

VERSION = metadata.version("disttrain")
TRAINER_IMAGE = f"disttrain/trainer:{VERSION}"  # reads TF_CONFIG; holds `disttrain-train` and `disttrain-run-function`
# An image reference as a container runtime reads one: an optional registry host (with its port), a path of
# lowercase components, then a tag, a digest, or both.
IMAGE_REFERENCE = (
    r"^([A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)
