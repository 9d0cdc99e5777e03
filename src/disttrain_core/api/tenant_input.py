"""What a tenant can write that the operator reads back, parsed at one edge into bounded values.

The operator writes annotations on the pods it creates and on the ConfigMaps that keep their logs, and
reads them back later, when the job may be gone. Anyone who may edit pods or ConfigMaps in a watched
namespace can change them. Every such value is read through the models here: a missing, malformed or
out-of-bounds value falls back to what the operator writes when it has nothing to say (the spec's
default), never past the bounds the job's spec itself has, so a forged value changes at most how its
own object is handled, and nothing downstream (a loop over a byte count, a date plus a TTL) can be
driven out of its range.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Self

import pydantic
from pydantic import BaseModel, ConfigDict, Field, WrapValidator

from disttrain_contract.kept_logs import DEFAULT_LOG_BYTES
from disttrain_contract.timestamps import parse_time
from disttrain_core.api.job import GROUP
from disttrain_core.api.spec import MAX_ATTEMPT, MAX_KEPT_LOG_SECONDS, MAX_LOG_BYTES, MIN_LOG_BYTES

LOG_MAX_BYTES = f"{GROUP}/log-max-bytes"
LOG_TTL = f"{GROUP}/log-ttl-seconds-after-job-deleted"
JOB_GONE_SINCE = f"{GROUP}/job-gone-since"
ATTEMPT = f"{GROUP}/attempt"  # on a pod and on its kept log: which attempt of its replica it is, from 1
# On a pod that restarts in place: how many runs of its trainer container ended within restarts already counted.
RUNS_COUNTED = f"{GROUP}/runs-counted"
# The annotations the operator owns on a pod: a template's own values for them are dropped.
OPERATOR_POD_ANNOTATIONS = frozenset({LOG_MAX_BYTES, LOG_TTL, ATTEMPT, RUNS_COUNTED})


def as_mapping(value: Any) -> Mapping[str, Any]:
    """An object's field that should be an object; anything else reads as an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """An object's field that should be a list; anything else reads as an empty one."""
    return value if isinstance(value, list) else []


def _or(default: Any) -> WrapValidator:
    """A value that does not validate is taken as `default`."""

    def validate(value: Any, handler: pydantic.ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except pydantic.ValidationError:
            return default

    return WrapValidator(validate)


LogBytes = Annotated[int, Field(ge=MIN_LOG_BYTES, le=MAX_LOG_BYTES), _or(DEFAULT_LOG_BYTES)]
TtlSeconds = Annotated[int, Field(ge=0, le=MAX_KEPT_LOG_SECONDS), _or(0)]
Attempt = Annotated[int | None, Field(ge=1, le=MAX_ATTEMPT), _or(None)]


class _Annotations(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    @classmethod
    def of(cls, metadata: Mapping[str, Any] | None) -> Self:
        annotations = (metadata or {}).get("annotations")
        return cls.model_validate(annotations if isinstance(annotations, Mapping) else {})


class PodLogNotes(_Annotations):
    """What a pod says of its log's keeping (`disttrain_core.kept_logs.pods` writes it from `spec.logs`)."""

    max_bytes: LogBytes = Field(DEFAULT_LOG_BYTES, alias=LOG_MAX_BYTES)
    attempt: Attempt = Field(None, alias=ATTEMPT)
    ttl_seconds: TtlSeconds = Field(0, alias=LOG_TTL)


class PodRunNotes(_Annotations):
    """What a pod that restarts in place says of its runs (`disttrain_core.restarts.in_place`); None on any other
    pod."""

    counted: Annotated[int | None, Field(ge=0, le=MAX_ATTEMPT), _or(None)] = Field(None, alias=RUNS_COUNTED)


class KeptLogNotes(_Annotations):
    """What a kept log's ConfigMap says of how long it outlives its job."""

    ttl_seconds: TtlSeconds = Field(0, alias=LOG_TTL)
    attempt: Attempt = Field(None, alias=ATTEMPT)
    job_gone_since: Annotated[datetime | None, pydantic.BeforeValidator(parse_time)] = Field(None, alias=JOB_GONE_SINCE)

    def gone_since(self, now: datetime) -> datetime | None:
        """When its job was first seen gone; a time still to come (written by hand) counts as now."""
        return None if self.job_gone_since is None else min(self.job_gone_since, now)
