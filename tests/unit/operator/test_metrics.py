"""The job counters follow the conditions that become True: a disruption is a restart, counted apart too."""

from __future__ import annotations

from prometheus_client import REGISTRY

from disttrain_operator import metrics


def _count(name: str, namespace: str) -> float:
    return REGISTRY.get_sample_value(name, {"namespace": namespace}) or 0.0


def test_a_disruption_counts_as_a_restart_and_as_a_disruption() -> None:
    namespace = "metrics-test"
    metrics.count_transition(namespace, "Restarting", "Restarting")
    metrics.count_transition(namespace, "Restarting", "Disrupted")
    assert _count("disttrain_jobs_restarted_total", namespace) == 2
    assert _count("disttrain_jobs_disrupted_total", namespace) == 1
