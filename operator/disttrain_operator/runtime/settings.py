"""The operator's settings, read once from its environment (the Deployment's `env`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from disttrain_operator.core.builders.gang import GangScheduler
from disttrain_operator.core.builders.settings import BuildSettings
from disttrain_operator.core.planner import STUCK_TERMINATING

DEFAULT_RECONCILE_WORKERS = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default pool, where kopf ran handlers
DEFAULT_PROGRESS_SECONDS = 10.0
DEFAULT_METRICS_PORT = 9090
SERVE_TFJOBS_ENV = "DISTTRAIN_SERVE_TFJOBS"


@dataclass(frozen=True)
class OperatorSettings:
    build: BuildSettings = field(default_factory=BuildSettings)
    watch_namespaces: tuple[str, ...] = ()  # empty: every namespace
    reconcile_workers: int = DEFAULT_RECONCILE_WORKERS
    progress_seconds: float = DEFAULT_PROGRESS_SECONDS
    stuck_after: timedelta = STUCK_TERMINATING
    metrics_port: int = DEFAULT_METRICS_PORT
    serve_tfjobs: bool = False  # also serve Kubeflow's TFJobs (`disttrain operator --serve-tfjobs`)

    @classmethod
    def from_environment(cls, env: Mapping[str, str] = os.environ) -> OperatorSettings:
        """DISTTRAIN_CLUSTER_DOMAIN, DISTTRAIN_GANG_SCHEDULER, DISTTRAIN_WATCH_NAMESPACES (comma-separated, set by
        `disttrain operator` from its --namespace values), DISTTRAIN_RECONCILE_WORKERS, DISTTRAIN_PROGRESS_SECONDS,
        DISTTRAIN_STUCK_POD_SECONDS, DISTTRAIN_METRICS_PORT and DISTTRAIN_SERVE_TFJOBS (1 or true); an empty or
        absent value keeps the default."""
        stuck = env.get("DISTTRAIN_STUCK_POD_SECONDS")
        return cls(
            build=BuildSettings(
                cluster_domain=env.get("DISTTRAIN_CLUSTER_DOMAIN") or None,
                gang_scheduler=GangScheduler(env.get("DISTTRAIN_GANG_SCHEDULER") or GangScheduler.SCHEDULER_PLUGINS),
            ),
            watch_namespaces=tuple(name for name in env.get("DISTTRAIN_WATCH_NAMESPACES", "").split(",") if name),
            reconcile_workers=int(env.get("DISTTRAIN_RECONCILE_WORKERS") or DEFAULT_RECONCILE_WORKERS),
            progress_seconds=float(env.get("DISTTRAIN_PROGRESS_SECONDS") or DEFAULT_PROGRESS_SECONDS),
            stuck_after=timedelta(seconds=float(stuck)) if stuck else STUCK_TERMINATING,
            metrics_port=int(env.get("DISTTRAIN_METRICS_PORT") or DEFAULT_METRICS_PORT),
            serve_tfjobs=env.get(SERVE_TFJOBS_ENV, "").lower() in ("1", "true"),
        )
