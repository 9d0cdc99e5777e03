"""Read and write YAML the way kubectl does: timestamps stay strings, streams without a List."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml


class _KubectlLoader(yaml.SafeLoader):
    """Like kubectl's YAML-to-JSON step: an unquoted date is a string, not a datetime."""


_KubectlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class UnreadableManifestError(yaml.YAMLError):
    """YAML that parses, but into something no manifest is: guards for the parser's own limits."""


MAX_VALUES = 1_000_000  # far beyond any job; YAML aliases can make a small file expand past any memory


def load_all(text: str) -> list[Any]:
    """Every non-empty document of a YAML stream; raises yaml.YAMLError on broken or hostile YAML."""
    try:
        documents = _json_document(text)
        if documents is None:
            documents = [document for document in yaml.load_all(text, Loader=_KubectlLoader) if document is not None]
    except RecursionError:
        raise UnreadableManifestError("the document is nested too deeply") from None
    except ValueError as error:  # an integer of thousands of digits
        raise UnreadableManifestError(str(error).split(";")[0]) from None
    _check_expansion(documents)
    return documents


def _json_document(text: str) -> list[Any] | None:
    """A JSON object read as JSON, as kubectl does: YAML 1.1 refuses keys over 1024 characters that JSON allows."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return None  # YAML flow style, or broken: the YAML reader says which


def _check_expansion(documents: list[Any]) -> None:
    """Count values as a reader expands them (aliases repeat what they name, and may even loop)."""
    pending, count = list(documents), 0
    while pending:
        value = pending.pop()
        count += 1
        if count > MAX_VALUES:
            raise UnreadableManifestError(f"the documents expand to more than {MAX_VALUES} values (through aliases?)")
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)


class _Dumper(yaml.SafeDumper):
    """A list of numbers on one line (`[1, 2, 3]`): a failure-policy rule's exit codes are a hundred and more."""


def _numbers_inline(dumper: yaml.SafeDumper, values: list[Any]) -> yaml.Node:
    inline = bool(values) and all(isinstance(value, int) and not isinstance(value, bool) for value in values)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", values, flow_style=inline or None)


_Dumper.add_representer(list, _numbers_inline)


def dump_all(documents: Iterable[Any]) -> str:
    """A deterministic stream: one document per object, keys in build order."""
    return yaml.dump_all(list(documents), Dumper=_Dumper, sort_keys=False, explicit_start=True, width=1 << 16)


def dump(document: Any) -> str:
    """One document, keys in build order, no `---`."""
    return yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=1 << 16)
