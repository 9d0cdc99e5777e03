"""charts/disttrain for the tests: helm, built from its module and cached, and what `helm template` makes."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
import yaml

from disttrain_dev.go_tools import HELM
from repository import ROOT

CHART = ROOT / "charts" / "disttrain"


def helm(
    *args: str, values: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """helm with `args` (skips the test where helm cannot be had); `values`, a values file's content, go to
    its standard input (`--values -`)."""
    unavailable = HELM.unavailable()
    if unavailable is not None:
        pytest.skip(unavailable)
    given = None if values is None else yaml.safe_dump(dict(values))
    command = [str(HELM.ensure()), *args, *(["--values", "-"] if values is not None else [])]
    return subprocess.run(command, input=given, capture_output=True, text=True, env=env, check=False)


def template(values: Mapping[str, Any], namespace: str = "disttrain-system") -> list[dict[str, Any]]:
    """The objects `helm template` makes with `values`."""
    result = helm("template", "disttrain", str(CHART), "--namespace", namespace, values=values)
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]
