"""Where each kind of job lives in the API, and how its object becomes the typed job the client returns."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pydantic

from disttrain.errors import InvalidJobError
from disttrain_core.api import job as dtj
from disttrain_core.api import tfjob
from disttrain_core.api.job import DistTrainJob
from disttrain_core.served import JobShape
from disttrain_core.tfjob_conversion import UnconvertibleError

logger = logging.getLogger(__name__)

JobKind = Literal["DistTrainJob", "TFJob"]


@dataclass(frozen=True)
class Resource:
    kind: JobKind
    group: str
    version: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


RESOURCES: dict[str, Resource] = {
    dtj.KIND: Resource(dtj.KIND, dtj.GROUP, dtj.VERSION, dtj.PLURAL),
    tfjob.KIND: Resource(tfjob.KIND, tfjob.GROUP, tfjob.VERSION, tfjob.PLURAL),
}


def resource_of(kind: str) -> Resource:
    try:
        return RESOURCES[kind]
    except KeyError:
        raise InvalidJobError(f"kind {kind!r} is not a job disttrain runs: use DistTrainJob or TFJob") from None


def typed_job(body: Mapping[str, Any]) -> DistTrainJob:
    """The job as the API models read it; a served TFJob in DistTrainJob's terms, its `kind` still TFJob."""
    try:
        return DistTrainJob.model_validate(JobShape.of(body).body_in(body))
    except (UnconvertibleError, pydantic.ValidationError) as error:
        name = body.get("metadata", {}).get("name", "?")
        raise InvalidJobError(f"{body.get('kind', 'job')} {name}: {error}") from error


def readable_jobs(bodies: Iterable[Mapping[str, Any]]) -> Iterator[DistTrainJob]:
    """The typed jobs of a listing; one the models cannot read (a TFJob that cannot be converted, which the
    operator fails, saying why) is left out with a warning, and the rest are listed."""
    for body in bodies:
        try:
            yield typed_job(body)
        except InvalidJobError as error:
            logger.warning("left out of the listing: %s", error)
