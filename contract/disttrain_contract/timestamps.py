"""Kubernetes' time formats (RFC 3339 in UTC), for every object and report both sides write."""

from __future__ import annotations

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    """A `metav1.Time`: whole seconds, `Z` (the format of conditions, startTime and progress reports)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(moment: datetime) -> str:
    """A `metav1.MicroTime`: microseconds, `Z` (Lease renewals)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: object) -> datetime | None:
    """A timestamp of either format, in UTC when it names no zone (so any two compare); None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
