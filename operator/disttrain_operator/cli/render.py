"""`disttrain render`: validate DistTrainJob manifests and print every object the operator would create."""

from __future__ import annotations

from typing import Any

import pydantic
import yaml

from disttrain_operator.api import yaml_io
from disttrain_operator.api.job import DistTrainJob
from disttrain_operator.api.validation import InvalidManifestError, Violation, validated
from disttrain_operator.core.builders.objects import desired_objects
from disttrain_operator.core.builders.settings import BuildSettings
from disttrain_operator.core.types import Manifest


class RenderError(ValueError):
    """A user-facing error: the message names the document, the field and the rule."""


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


def render_objects(text: str, settings: BuildSettings, namespace: str | None = None) -> list[Manifest]:
    try:
        documents = yaml_io.load_all(text)
    except yaml.YAMLError as error:
        raise RenderError(f"broken YAML: {error}") from error
    if not documents:
        raise RenderError("no DistTrainJob in the input")
    objects: list[Manifest] = []
    for number, document in enumerate(documents, start=1):
        try:
            job = parse_job(document, namespace)
        except InvalidManifestError as error:
            where = describe_document(number, document)
            details = "\n".join(f"  {violation}" for violation in error.violations)
            raise RenderError(f"{where} is not a valid DistTrainJob:\n{details}") from error
        objects.extend(desired_objects(job, settings))
    return objects


def describe_document(number: int, document: Any) -> str:
    """`document N (name)`: where in a stream an error is, with the manifest's name if it has one."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"document {number}" + (f" ({name})" if isinstance(name, str) and name else "")


def render(text: str, settings: BuildSettings, namespace: str | None = None) -> str:
    return yaml_io.dump_all(render_objects(text, settings, namespace))
