"""The operator's settings from its environment: defaults for empty variables, and a bad value named."""

from __future__ import annotations

from datetime import timedelta

import pytest

from disttrain_cli.operator_command import run_operator
from disttrain_core.builders.gang import GangScheduler
from disttrain_core.images import TRAINER_IMAGE
from disttrain_operator.operator_settings import DEFAULT_METRICS_PORT, OperatorSettings, SettingsError
from support.repository import ROOT


def test_variables_set_the_settings_and_empty_ones_keep_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTTRAIN_WATCH_NAMESPACES", "team-a, team-*")
    monkeypatch.setenv("DISTTRAIN_STUCK_POD_SECONDS", "90")
    monkeypatch.setenv("DISTTRAIN_GANG_SCHEDULER", "volcano")
    monkeypatch.setenv("DISTTRAIN_SERVE_TFJOBS", "1")
    monkeypatch.setenv("DISTTRAIN_METRICS_PORT", "")
    settings = OperatorSettings.from_environment()
    assert settings.watch_namespaces == ("team-a", "team-*")
    assert settings.stuck_after == timedelta(seconds=90)
    assert settings.build.gang_scheduler is GangScheduler.VOLCANO
    assert (settings.serve_tfjobs, settings.metrics_port) == (True, DEFAULT_METRICS_PORT)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DISTTRAIN_RECONCILE_WORKERS", "many"),
        ("DISTTRAIN_PROGRESS_SECONDS", "0"),
        ("DISTTRAIN_METRICS_PORT", "70000"),
        ("DISTTRAIN_PROGRESS_DEADLINE_SECONDS", "5"),
        ("DISTTRAIN_PROGRESS_DEADLINE_SECONDS", "100000"),
        ("DISTTRAIN_TRAINER_IMAGE", "Team/Trainer:latest"),
        ("DISTTRAIN_TRAINER_IMAGE", "trainer:1 --privileged"),
    ],
)
def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=f"^{variable}: .*got '{value}'"):
        OperatorSettings.from_environment()


def test_the_operator_stops_on_a_bad_value_before_it_starts_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    """The message docs/admins.md shows."""
    monkeypatch.setenv("DISTTRAIN_WATCH_SECONDS", "1")
    with pytest.raises(SystemExit) as stopped:
        run_operator(["--namespace", "team-a"])
    shown = " ".join((ROOT / "docs" / "admins.md").read_text().split())
    assert f"`{stopped.value.code}`" in shown


def test_a_progress_deadline_shorter_than_one_poll_is_refused_and_a_kept_one_reaches_the_planner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DISTTRAIN_PROGRESS_SECONDS", "30")
    monkeypatch.setenv("DISTTRAIN_PROGRESS_DEADLINE_SECONDS", "20")
    with pytest.raises(SettingsError, match=r"^DISTTRAIN_PROGRESS_DEADLINE_SECONDS: .*shorter than one progress poll"):
        OperatorSettings.from_environment()
    monkeypatch.setenv("DISTTRAIN_PROGRESS_DEADLINE_SECONDS", "600")
    assert OperatorSettings.from_environment().build.progress_deadline_seconds == 600


def test_the_install_s_trainer_image_reaches_the_builders(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OperatorSettings.from_environment().build.trainer_image == TRAINER_IMAGE
    image = "registry.example.com:5000/team/trainer:0.1.0@sha256:" + "a" * 64
    monkeypatch.setenv("DISTTRAIN_TRAINER_IMAGE", image)
    assert OperatorSettings.from_environment().build.trainer_image == image
