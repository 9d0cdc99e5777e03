"""A manifest read as the API server would take it: the CRD's own rules first, then the models."""

from __future__ import annotations

from typing import Any

import pydantic

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.validation import InvalidManifestError, Violation, validated


def parse_job(manifest: Any, namespace: str | None = None) -> DistTrainJob:
    """A typed job from a manifest, validated by the CRD's own rules first.

    `namespace` fills in a manifest that names none; the API server's default namespace is `default`.
    A manifest with only `generateName` is named as the API server would, with `xxxxx` standing in for
    the five random characters it appends.
    """
    document = validated(_with_generated_name(manifest))
    if namespace and not document["metadata"].get("namespace"):
        document["metadata"] = {**document["metadata"], "namespace": namespace}
    try:
        return DistTrainJob.model_validate(document)
    except pydantic.ValidationError as error:  # only reachable if the models and the CRD disagree
        violations = [Violation(".".join(map(str, e["loc"])), e["msg"]) for e in error.errors()]
        raise InvalidManifestError(violations) from error


GENERATED_SUFFIX = "xxxxx"


def _with_generated_name(manifest: Any) -> Any:
    metadata = manifest.get("metadata") if isinstance(manifest, dict) else None
    if not isinstance(metadata, dict) or metadata.get("name") or not isinstance(metadata.get("generateName"), str):
        return manifest
    return {**manifest, "metadata": {**metadata, "name": metadata["generateName"] + GENERATED_SUFFIX}}
