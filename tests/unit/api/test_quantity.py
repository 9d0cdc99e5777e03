"""Resource quantities read as the API server reads them, and refused where it would refuse them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from disttrain_core.api.quantity import MAX_QUANTITY, QuantityError, format_quantity, parse_quantity, resource_problems


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2Gi", Decimal(2 * 1024**3)),
        ("1e3", Decimal(1000)),
        ("100n", Decimal("1E-7")),
        ("1.5k", Decimal(1500)),
        (".5", Decimal("0.5")),
        ("2E", Decimal(2 * 10**18)),
        (3, Decimal(3)),
    ],
)
def test_each_suffix_and_exponent_is_its_value(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["2GB", "1..5", "Gi", "1 Gi", "1e99999", "", True, None])
def test_what_the_api_server_refuses_is_refused(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_the_largest_quantity_kubernetes_keeps_passes_and_one_more_does_not() -> None:
    assert parse_quantity(str(MAX_QUANTITY)) == MAX_QUANTITY
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(str(MAX_QUANTITY + 1))


def test_whole_units_stay_whole_and_finer_ones_round_up_to_thousandths() -> None:
    assert format_quantity(Decimal(4)) == "4"
    assert format_quantity(Decimal("0.0001")) == "1m"
    assert format_quantity(Decimal("1.5")) == "1500m"


def test_a_container_s_bad_quantities_are_named_by_where_they_are() -> None:
    resources = {"requests": {"cpu": "1x", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "two"}, "claims": []}
    problems = resource_problems(resources, "Worker")
    assert [problem.split(":")[0] for problem in problems] == [
        "Worker.resources.requests.cpu",
        "Worker.resources.limits.nvidia.com/gpu",
    ]
    assert resource_problems("not a mapping", "Worker") == []
