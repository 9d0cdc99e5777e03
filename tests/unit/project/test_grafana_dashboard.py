"""The Grafana dashboard in deploy/ loads and asks only for metrics the operator exports."""

from __future__ import annotations

import json
import re

from prometheus_client import REGISTRY

from disttrain_operator import metrics
from support.repository import ROOT

DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
SERIES_SUFFIXES = ("_bucket", "_count", "_sum", "_total")
OPERATOR_PREFIXES = ("disttrain_", "controller_runtime_", "workqueue_")


def _exported() -> set[str]:
    """Every series name the operator's registry can produce (counters as `_total`, histograms' parts)."""
    assert metrics.JOBS_BY_PHASE is not None  # the module registered its metrics
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        names.update(f"{family.name}{suffix}" for suffix in SERIES_SUFFIXES)
    return {name for name in names if name.startswith(OPERATOR_PREFIXES)}


def test_every_query_names_an_exported_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    expressions += [variable["definition"] for variable in dashboard["templating"]["list"] if "definition" in variable]
    pattern = rf"\b(?:{'|'.join(OPERATOR_PREFIXES)})[a-z_]+"
    used = {name for expression in expressions for name in re.findall(pattern, expression)}
    assert used and used <= _exported(), used - _exported()
    titles = [panel["title"] for panel in dashboard["panels"]]
    for topic in ("phase", "Restarts", "Reconcile latency", "API errors", "Work queue", "retries"):
        assert any(topic in title for title in titles), topic


def test_panels_have_unique_ids_and_fit_the_grid() -> None:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    assert all(panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24 for panel in panels)


def test_jobs_by_phase_follow_the_known_jobs() -> None:
    metrics.set_active({("team", "Running"): 2})
    metrics.set_active({("team", "Running"): 1, ("team", "Succeeded"): 1})
    value = REGISTRY.get_sample_value
    assert value("disttrain_jobs", {"namespace": "team", "phase": "Running"}) == 1
    assert value("disttrain_jobs", {"namespace": "team", "phase": "Succeeded"}) == 1
    assert value("disttrain_jobs_active", {"namespace": "team"}) == 1
