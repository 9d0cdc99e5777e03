"""What every view says of a job (`disttrain_core.summary`), against the fixtures the Headlamp plugin's
TypeScript port is tested against too (disttrain-headlamp-plugin/src/summary.test.ts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from disttrain.job_kinds import typed_job
from disttrain_core.summary import summary
from support.repository import ROOT

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "summaries").glob("*.json"))


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_a_job_is_summed_up_as_its_fixture_says(path: Path) -> None:
    fixture = json.loads(path.read_text())
    assert summary(typed_job(fixture["job"])) == fixture["summary"]


def test_the_fixtures_cover_a_fresh_job_a_served_tfjob_and_numbers_in_exponent_form() -> None:
    summaries = [json.loads(path.read_text())["summary"] for path in FIXTURES]
    assert {"Pending"} <= {item["phase"] for item in summaries}
    assert any("--kind TFJob" in item["tensorboardCommand"] for item in summaries)
    assert any("e-05" in item["progress"] for item in summaries)
