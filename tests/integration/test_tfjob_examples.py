"""Kubeflow's own TFJob examples, from the training-operator module the benchmarks build, convert,
render and pass the API server's checks of the DistTrainJob CRD (a server-side dry run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from disttrain_cli.convert import convert_text
from disttrain_cli.render import render
from disttrain_core.api import yaml_io
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.tfjob_conversion import is_tfjob
from disttrain_dev import peer
from disttrain_dev.build import module_dir
from support.kube_cluster import Cluster


def _examples() -> list[Path]:
    folder = module_dir(peer.MODULE, peer.VERSION) / "examples" / "tensorflow"
    return sorted(path for path in folder.rglob("*.yaml") if any(map(is_tfjob, yaml_io.load_all(path.read_text()))))


@pytest.fixture(scope="module")
def examples() -> list[Path]:
    found = _examples()
    assert len(found) >= 5, found  # simple, dist-mnist, mnist_with_summaries, estimator-API, keras-API
    return found


def test_kubeflow_examples_convert_render_and_pass_the_api_server(
    examples: list[Path], cluster: Cluster, dry_run_namespace: str
) -> None:
    for example in examples:
        converted = convert_text(example.read_text())
        assert "kind: DistTrainJob" in converted, example
        assert "kind: Pod" in render(converted, BuildSettings(), namespace=dry_run_namespace)
        jobs = yaml_io.load_all(converted)
        for job in jobs:
            job["metadata"]["namespace"] = dry_run_namespace
        cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml_io.dump_all(jobs))
