"""Kubernetes resource quantities (`500m`, `2Gi`, `1Pi`, `2E`, `100n`, `1e3`), read exactly as the API
server reads them: the grammar of k8s.io/apimachinery's `resource.Quantity`, in Decimal so that no
suffix or exponent overflows or loses precision. A value the API server would refuse in a pod is
refused here too, with a message that names it, so a job fails with a clear condition rather than
on every reconcile."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal
from typing import Any

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]{1,4})|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)"
)
# Kubernetes keeps a quantity in an int64 of its smallest unit where it can; no real resource comes near.
MAX_QUANTITY = Decimal(2**63 - 1)


class QuantityError(ValueError):
    pass


def parse_quantity(value: Any) -> Decimal:
    """The quantity's value in its base unit (cores, bytes, devices)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError(f"{value!r} is not a quantity")
    text = str(value)
    found = _QUANTITY.fullmatch(text)
    if found is None:
        raise QuantityError(f"{text[:64]!r} is not a quantity (e.g. 500m, 2Gi, 1e3)")
    number = Decimal(found["number"])
    if found["exponent"]:
        number = number.scaleb(int(found["exponent"][1:]))
    elif found["suffix"] in _BINARY:
        number *= 1024 ** _BINARY[found["suffix"]]
    else:
        number = number.scaleb(_DECIMAL[found["suffix"] or ""])
    if abs(number) > MAX_QUANTITY:
        raise QuantityError(f"{text!r} is too large a quantity")
    return number


def format_quantity(value: Decimal) -> str:
    """Whole units as an integer, anything finer in thousandths rounded up (as Kubernetes rounds CPU)."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value(rounding=ROUND_CEILING))}m"


def resource_problems(resources: Any, where: str) -> list[str]:
    """What is wrong with the quantities of a container's `resources` (requests, limits, claims aside)."""
    if not isinstance(resources, dict):
        return []
    problems = []
    for kind in ("requests", "limits"):
        quantities = resources.get(kind)
        for name, quantity in (quantities or {}).items() if isinstance(quantities, dict) else ():
            try:
                parse_quantity(quantity)
            except QuantityError as error:
                problems.append(f"{where}.resources.{kind}.{name}: {error}")
    return problems
