"""`disttrain render`: validate DistTrainJob manifests and print every object the operator would create."""

from __future__ import annotations

from typing import Any

import pydantic
import yaml

from disttrain_operator import manifests
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.builders.objects import Manifest, desired_objects
from disttrain_operator.builders.settings import BuildSettings
from disttrain_operator.validation import InvalidManifestError, Violation, validated


class RenderError(ValueError):
    """A user-facing error: the message names the document, the field and the rule."""


def parse_job(manifest: Any, namespace: str | None = None) -> DistTrainJob:
    """A typed job from a manifest, validated by the CRD's own rules first.

    `namespace` fills in a manifest that names none; the API server's default namespace is `default`.
    """
    document = validated(manifest)
    if namespace and not document["metadata"].get("namespace"):
        document["metadata"] = {**document["metadata"], "namespace": namespace}
    try:
        return DistTrainJob.model_validate(document)
    except pydantic.ValidationError as error:  # only reachable if the models and the CRD disagree
        violations = [Violation(".".join(map(str, e["loc"])), e["msg"]) for e in error.errors()]
        raise InvalidManifestError(violations) from error


def render_objects(text: str, settings: BuildSettings, namespace: str | None = None) -> list[Manifest]:
    try:
        documents = manifests.load_all(text)
    except yaml.YAMLError as error:
        raise RenderError(f"broken YAML: {error}") from error
    if not documents:
        raise RenderError("no DistTrainJob in the input")
    objects: list[Manifest] = []
    for number, document in enumerate(documents, start=1):
        try:
            job = parse_job(document, namespace)
        except InvalidManifestError as error:
            name = document.get("metadata", {}).get("name") if isinstance(document, dict) else None
            where = f"document {number}" + (f" ({name})" if isinstance(name, str) else "")
            details = "\n".join(f"  {violation}" for violation in error.violations)
            raise RenderError(f"{where} is not a valid DistTrainJob:\n{details}") from error
        objects.extend(desired_objects(job, settings))
    return objects


def render(text: str, settings: BuildSettings, namespace: str | None = None) -> str:
    return manifests.dump_all(render_objects(text, settings, namespace))
