"""charts/disttrain/README.md, generated from the chart's values file: each value is described once, by its
`# --` comment in values.yaml, and the table of values, their defaults and descriptions is made from it.
`python -m disttrain_dev.chart_readme` writes it; a unit test fails when it is not what values.yaml makes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "disttrain"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z][\w-]*):")
_DESCRIPTION = re.compile(r"^ *# -- ?(?P<text>.*)$")
_MORE = re.compile(r"^ *# ?(?P<text>.*)$")

HEADER = """\
# disttrain's Helm chart

The disttrain operator, as admins install operators: `helm install disttrain charts/disttrain
--namespace disttrain-system --create-namespace` (README.md's "Install on your own cluster" shows it,
and a test runs it). The CRDs are templates, so `helm upgrade` upgrades them, and `helm uninstall`
keeps them and the users' jobs. deploy/ (kustomize) makes the same objects for each install mode.

<!-- Generated from values.yaml by `python -m disttrain_dev.chart_readme`; do not edit by hand. -->

## Values

| Value | Default | What it does |
|---|---|---|
"""


def described(values_text: str) -> list[tuple[str, str]]:
    """Each described value's dotted path and description, in the file's order."""
    found: list[tuple[str, str]] = []
    path: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in values_text.splitlines():
        if (start := _DESCRIPTION.match(line)) is not None:
            pending = [start["text"]]
        elif pending is not None and (more := _MORE.match(line)) is not None:
            pending.append(more["text"])
        elif (key := _KEY.match(line)) is not None:
            indent = len(key["indent"])
            path = [(depth, name) for depth, name in path if depth < indent] + [(indent, key["key"])]
            if pending is not None:
                found.append((".".join(name for _, name in path), " ".join(pending)))
            pending = None
        elif not line.strip().startswith("#"):
            pending = None
    return found


def _value(values: dict[str, Any], dotted: str) -> Any:
    value: Any = values
    for name in dotted.split("."):
        value = value[name]
    return value


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def readme(chart: Path = CHART) -> str:
    text = (chart / "values.yaml").read_text(encoding="utf-8")
    values = yaml.safe_load(text)
    rows = [f"| `{path}` | `{json.dumps(_value(values, path))}` | {_cell(what)} |" for path, what in described(text)]
    return HEADER + "\n".join(rows) + "\n"


def main() -> int:
    (CHART / "README.md").write_text(readme(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
