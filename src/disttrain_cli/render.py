"""`disttrain render`: validate DistTrainJob manifests and print every object the operator would create."""

from __future__ import annotations

from typing import Any

import yaml

from disttrain_core.api import yaml_io
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.objects import desired_objects
from disttrain_core.types import Manifest


class RenderError(ValueError):
    """A user-facing error: the message names the document, the field and the rule."""


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
        unmet = settings.gang.unmet_need(job)  # what the operator would fail the job for, before any pod
        if unmet is not None:
            raise RenderError(f"{describe_document(number, document)} would fail: {unmet}")
        objects.extend(desired_objects(job, settings))
    return objects


def describe_document(number: int, document: Any) -> str:
    """`document N (name)`: where in a stream an error is, with the manifest's name if it has one."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"document {number}" + (f" ({name})" if isinstance(name, str) and name else "")


def render(text: str, settings: BuildSettings, namespace: str | None = None) -> str:
    return yaml_io.dump_all(render_objects(text, settings, namespace))
