"""Jobs and replica specs as the builders' tests write them, and the TF_CONFIG a built pod carries."""

from __future__ import annotations

import json
from typing import Any

from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.spec import trainer_container
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.types import Manifest
from support.job_builder import JobBuilder
from support.repository import ROOT

GOLDEN = ROOT / "tests" / "golden"
DEFAULT_SETTINGS = BuildSettings()


def built_job(
    spec: dict[str, Any], name: str = "demo", namespace: str = "team", uid: str | None = None
) -> DistTrainJob:
    """A job with this spec, checked by the CRD's rules."""
    return JobBuilder(name, namespace).metadata(**({"uid": uid} if uid else {})).spec(**spec).job()


def unchecked_job(spec: dict[str, Any]) -> DistTrainJob:
    """A job as the models read it, without the CRD's rules: as the operator reads a served TFJob."""
    return JobBuilder("demo", "team").spec(**spec).model()


def replica_spec(replicas: int, **container: Any) -> dict[str, Any]:
    """A replica spec of one `tensorflow` container with these fields."""
    return {
        "replicas": replicas,
        "template": {"spec": {"containers": [{"name": "tensorflow", "image": "i", **container}]}},
    }


def tf_config_of(manifest: Manifest) -> dict[str, Any] | None:
    """The TF_CONFIG a built pod's trainer container is given, None without one."""
    env = trainer_container(manifest["spec"]["containers"]).get("env", [])
    values = [entry["value"] for entry in env if entry["name"] == "TF_CONFIG"]
    return json.loads(values[0]) if values else None
