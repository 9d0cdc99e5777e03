"""The images a release of disttrain publishes, tagged with its version: what a job runs when it names no other."""

from __future__ import annotations

from importlib import metadata

VERSION = metadata.version("disttrain")
TRAINER_IMAGE = f"disttrain/trainer:{VERSION}"  # reads TF_CONFIG; holds `disttrain-train` and `disttrain-run-function`
