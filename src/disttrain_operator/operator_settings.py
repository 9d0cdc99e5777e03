"""The operator's settings, read once from its environment (the Deployment's `env`), each variable
`DISTTRAIN_` and the field's name in capitals. An empty or absent variable keeps the default; a bad
value stops the operator with the variable's name and what it expects."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Annotated, Any

import pydantic
from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from disttrain_core.api.spec import MAX_PROGRESS_DEADLINE_SECONDS, MIN_PROGRESS_DEADLINE_SECONDS
from disttrain_core.builders.build_settings import BuildSettings
from disttrain_core.builders.gang import GangScheduler
from disttrain_core.images import IMAGE_REFERENCE, TRAINER_IMAGE
from disttrain_core.planner import STUCK_TERMINATING
from disttrain_operator.kept_log_keeper import SWEEP_SECONDS
from disttrain_operator.watch import WATCH_SECONDS

ENV_PREFIX = "DISTTRAIN_"
DEFAULT_RECONCILE_WORKERS = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default pool, where kopf ran handlers
DEFAULT_PROGRESS_SECONDS = 10.0
DEFAULT_METRICS_PORT = 9090


class SettingsError(Exception):
    """A variable of the operator's environment holds a value it cannot take."""


class OperatorSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True, extra="ignore")

    cluster_domain: str | None = None  # appended to TF_CONFIG's addresses (`BuildSettings`)
    gang_scheduler: GangScheduler = GangScheduler.SCHEDULER_PLUGINS
    gang_by_default: bool = False  # every job a gang unless `runPolicy.gang: false` (served TFJobs too)
    # Comma-separated; `disttrain operator` sets it from its --namespace values. Empty: every namespace.
    watch_namespaces: Annotated[tuple[str, ...], NoDecode] = ()
    reconcile_workers: int = Field(DEFAULT_RECONCILE_WORKERS, ge=1)
    progress_seconds: float = Field(DEFAULT_PROGRESS_SECONDS, gt=0)
    # Every job's runPolicy.progressDeadlineSeconds where it sets none (served TFJobs too); unset: none.
    progress_deadline_seconds: int | None = Field(
        None, ge=MIN_PROGRESS_DEADLINE_SECONDS, le=MAX_PROGRESS_DEADLINE_SECONDS
    )
    stuck_pod_seconds: float = Field(STUCK_TERMINATING.total_seconds(), gt=0)
    metrics_port: int = Field(DEFAULT_METRICS_PORT, ge=1, le=65535)
    serve_tfjobs: bool = False  # also serve Kubeflow's TFJobs (`disttrain operator --serve-tfjobs`)
    # Kueue's own TFJob integration (`kubeflow.org/tfjob`, as with training-operator) queues the served TFJobs:
    # the operator runs them, Kueue makes their Workloads, suspends and resumes them (MultiKueue's TFJobs).
    kueue_tfjob_integration: bool = False
    watch_seconds: int = Field(WATCH_SECONDS, ge=5)  # how long the API server keeps one watch open
    log_sweep_seconds: float = Field(SWEEP_SECONDS, gt=0)  # how often kept logs past their TTL are looked for
    network_policy: bool = True  # each job's trainers closed to other pods (`disttrain_core.builders.network_policy`)
    # Whole-job restarts in place where the cluster restarts containers on rules (`disttrain_core.restarts.in_place`).
    restart_in_place: bool = True
    # The operator's own namespace, which that policy admits to the progress port: the Deployment gives it from
    # the downward API. Unset (an operator outside the cluster), the policy admits the operator's label anywhere.
    pod_namespace: str | None = Field(None, validation_alias="POD_NAMESPACE")
    # The image a trainer container that names none runs (`Client.train`'s jobs among them): the chart's
    # `trainerImage` and kustomize's variable name the one pushed with the install.
    trainer_image: str = Field(TRAINER_IMAGE, max_length=1024, pattern=IMAGE_REFERENCE)

    @field_validator("watch_namespaces", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return tuple(name.strip() for name in value.split(",") if name.strip()) if isinstance(value, str) else value

    @field_validator("progress_deadline_seconds")
    @classmethod
    def _deadline_after_a_poll(cls, deadline: int | None, info: ValidationInfo) -> int | None:
        poll = info.data.get("progress_seconds", DEFAULT_PROGRESS_SECONDS)
        if deadline is not None and deadline < poll:
            raise ValueError(f"shorter than one progress poll ({poll} s): it could not be kept")
        return deadline

    @property
    def build(self) -> BuildSettings:
        return BuildSettings(
            cluster_domain=self.cluster_domain,
            gang_scheduler=self.gang_scheduler,
            gang_by_default=self.gang_by_default,
            network_policy=self.network_policy,
            operator_namespace=self.pod_namespace,
            progress_deadline_seconds=self.progress_deadline_seconds,
            restart_in_place=self.restart_in_place,
            trainer_image=self.trainer_image,
        )

    @property
    def stuck_after(self) -> timedelta:
        return timedelta(seconds=self.stuck_pod_seconds)

    @classmethod
    def from_environment(cls) -> OperatorSettings:
        try:
            return cls()
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{ENV_PREFIX}{str(problem['loc'][0]).upper()}: {problem['msg']} (got {problem.get('input')!r})"
                for problem in error.errors()
            )
            raise SettingsError(problems) from None
