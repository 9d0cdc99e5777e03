"""The DistTrainJob resource as a whole: identity, metadata, spec and status."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import ConfigDict, Field

from disttrain_core.api.rules import Rule
from disttrain_core.api.spec import ApiModel, DistTrainJobSpec
from disttrain_core.api.status import DistTrainJobStatus

GROUP = "disttrain.io"
VERSION = "v1alpha1"
API_VERSION: Final = "disttrain.io/v1alpha1"
KIND: Final = "DistTrainJob"
PLURAL = "disttrainjobs"
SINGULAR = "disttrainjob"
SHORT_NAMES = ("dtj",)
MAX_DNS_LABEL = 63

# A job's name names its Service and is the first part of every pod name and hostname, so it must be
# a DNS-1035 label and leave room for `-{type}-{index}` within 63 characters.
ROOT_RULES = (
    Rule(
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter) "
        "because it names the job's Service",
    ),
    Rule(
        "self.spec.replicaSpecs.all(t, size(self.metadata.name) + size(t) + 2"
        " + size(string(self.spec.replicaSpecs[t].replicas > 1 ? self.spec.replicaSpecs[t].replicas - 1 : 0))"
        f" <= {MAX_DNS_LABEL})",
        "metadata.name is too long: every pod name {job}-{type}-{index} must fit in 63 characters",
    ),
)


class ObjectMeta(ApiModel):
    """The metadata fields the operator reads; everything else the API server keeps is ignored."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class DistTrainJob(ApiModel):
    """A job as the core works on it: a DistTrainJob, or a TFJob served in its terms (`disttrain_core.served`),
    whose apiVersion and kind its children's owner references and labels name."""

    model_config = ConfigDict(extra="ignore")

    api_version: Literal["disttrain.io/v1alpha1", "kubeflow.org/v1"] = API_VERSION
    kind: Literal["DistTrainJob", "TFJob"] = KIND
    metadata: ObjectMeta
    spec: DistTrainJobSpec
    status: DistTrainJobStatus = Field(default_factory=DistTrainJobStatus)
