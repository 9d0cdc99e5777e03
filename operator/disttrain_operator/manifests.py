"""Read and write YAML the way kubectl does: timestamps stay strings, streams without a List."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml


class _KubectlLoader(yaml.SafeLoader):
    """Like kubectl's YAML-to-JSON step: an unquoted date is a string, not a datetime."""


_KubectlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_all(text: str) -> list[Any]:
    """Every non-empty document of a YAML stream; raises yaml.YAMLError on broken YAML."""
    return [document for document in yaml.load_all(text, Loader=_KubectlLoader) if document is not None]


def dump_all(documents: Iterable[Any]) -> str:
    """A deterministic stream: one document per object, keys in build order."""
    return yaml.safe_dump_all(list(documents), sort_keys=False, explicit_start=True, width=1 << 16)
