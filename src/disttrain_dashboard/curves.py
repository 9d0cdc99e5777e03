"""The loss and throughput curves of a job, from its status's progress history, as SVG coordinates.

Drawn on the server into the page (an inline `<svg>`), so a page needs no charting script and no
browser work to show them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from disttrain_core.api.status import ProgressPoint

WIDTH = 480
HEIGHT = 160
MARGIN = 8


@dataclass(frozen=True)
class Curve:
    title: str
    points: str  # the polyline's "x,y x,y ..."
    low: float
    high: float
    first_step: int
    last_step: int


def _curve(
    title: str, history: Sequence[ProgressPoint], value: Callable[[ProgressPoint], float | None]
) -> Curve | None:
    pairs = [(point.step, found) for point in history if (found := value(point)) is not None]
    if len(pairs) < 2:
        return None
    steps = [step for step, _ in pairs]
    values = [found for _, found in pairs]
    first, last, low, high = min(steps), max(steps), min(values), max(values)
    step_span, value_span = max(last - first, 1), (high - low) or 1.0
    inner_width, inner_height = WIDTH - 2 * MARGIN, HEIGHT - 2 * MARGIN

    def position(step: int, found: float) -> str:
        x = MARGIN + (step - first) / step_span * inner_width
        y = MARGIN + (1 - (found - low) / value_span) * inner_height
        return f"{x:.1f},{y:.1f}"

    return Curve(title, " ".join(position(step, found) for step, found in pairs), low, high, first, last)


def curves(history: Sequence[ProgressPoint]) -> list[Curve]:
    """Loss and examples per second over steps; a curve with fewer than two reports is left out."""
    found = [
        _curve("loss", history, lambda point: point.loss),
        _curve("examples per second", history, lambda point: point.examples_per_second),
    ]
    return [curve for curve in found if curve is not None]
