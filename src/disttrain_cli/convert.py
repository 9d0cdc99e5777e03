"""`disttrain convert`: Kubeflow TFJob manifests in, DistTrainJob manifests out, each checked by the
same rules as `disttrain render` and headed by comments on what changes.

Other documents (a PVC beside the job) pass through unchanged, and a `List` (what
`kubectl get tfjobs -o yaml` prints) is read item by item, so a file or a cluster's TFJobs convert
in one step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from disttrain_cli.render import RenderError, describe_document
from disttrain_core.api import yaml_io
from disttrain_core.api.parsing import parse_job
from disttrain_core.api.validation import InvalidManifestError
from disttrain_core.tfjob_conversion import UnconvertibleError, convert, is_tfjob

HEADER = "Converted from TFJob {name} by `disttrain convert`:"


def _items(documents: list[Any]) -> list[Any]:
    """Documents, with each `List` replaced by its items."""
    expanded: list[Any] = []
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List" and isinstance(document.get("items"), list):
            expanded.extend(document["items"])
        else:
            expanded.append(document)
    return expanded


def _commented(notes: list[str], document: Any) -> str:
    comments = "".join(f"# {line}\n" for line in notes)
    return f"---\n{comments}{yaml_io.dump(document)}"


def convert_text(text: str) -> str:
    """Every document converted or passed through; RenderError names the first that cannot be converted."""
    try:
        documents = _items(yaml_io.load_all(text))
    except yaml.YAMLError as error:
        raise RenderError(f"broken YAML: {error}") from error
    if not any(is_tfjob(document) for document in documents):
        raise RenderError("no TFJob in the input")
    output: list[str] = []
    for number, document in enumerate(documents, start=1):
        if not is_tfjob(document):
            output.append(_commented([], document))
            continue
        where = describe_document(number, document)
        try:
            conversion = convert(document)
        except UnconvertibleError as error:
            raise RenderError(f"{where} cannot be converted: {error}") from error
        try:
            parse_job(conversion.job)
        except InvalidManifestError as error:
            details = "\n".join(f"  {violation}" for violation in error.violations)
            raise RenderError(f"{where} converts to an invalid DistTrainJob:\n{details}") from error
        metadata = document.get("metadata") or {}
        name = metadata.get("name") or (f"{metadata['generateName']}*" if metadata.get("generateName") else where)
        notes = [HEADER.format(name=name), *(f"- {note}" for note in conversion.notes)]
        output.append(_commented(notes, conversion.job))
    return "".join(output)
