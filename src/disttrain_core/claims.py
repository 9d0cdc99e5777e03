"""A job's PersistentVolumeClaims in its status: the `VolumeUnbound` condition. A claim that stays Pending
while its StorageClass says why (a Warning Event on the claim: `ProvisioningFailed`, a class that does
not exist, an access mode the provisioner refuses) turns it True with those words, which the status
writer also posts as a Warning Event; once every claim binds it turns False. A claim Pending without a
Warning (a class that binds on the first consumer, waiting for a pod) says nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from disttrain_contract.timestamps import parse_time
from disttrain_core.api.job import DistTrainJob
from disttrain_core.api.status import ConditionType, DistTrainJobStatus
from disttrain_core.api.tenant_input import as_list, as_mapping
from disttrain_core.status_from_pods import with_condition
from disttrain_core.types import Verdict

# A claim Pending this long is asked about: a provisioner that binds at once has done so by then.
UNBOUND_AFTER = timedelta(seconds=20)
MAX_WORDS = 1024  # of the StorageClass's message kept per claim
UNBOUND = "ClaimUnbound"
BOUND = "ClaimsBound"
EPOCH = datetime.fromtimestamp(0, UTC)  # an Event without a time is the oldest


@dataclass(frozen=True)
class ClaimView:
    """What the operator keeps of a claim: its name and uid, and since when it has been Pending (None once
    bound or lost: the claim no longer waits for its StorageClass)."""

    name: str
    uid: str
    pending_since: datetime | None


def claim_view(body: Mapping[str, Any]) -> ClaimView:
    metadata, status = as_mapping(body.get("metadata")), as_mapping(body.get("status"))
    pending = status.get("phase", "Pending") == "Pending"
    created = parse_time(metadata.get("creationTimestamp"))
    return ClaimView(str(metadata.get("name", "")), str(metadata.get("uid", "")), created if pending else None)


def to_ask(claims: Sequence[ClaimView], now: datetime) -> list[ClaimView]:
    """The claims Pending for `UNBOUND_AFTER` or longer, whose Events are read for why."""
    return [claim for claim in claims if claim.pending_since is not None and now - claim.pending_since >= UNBOUND_AFTER]


def storage_words(events: Any) -> str | None:
    """`reason: message` of the newest Warning among a claim's Events (as listed, any shape), bounded; None
    when there is none."""
    newest: tuple[datetime, str] | None = None
    for item in as_list(events):
        event = as_mapping(item)
        if event.get("type") != "Warning":
            continue
        metadata = as_mapping(event.get("metadata"))
        when = next(
            (
                time
                for value in (event.get("lastTimestamp"), event.get("eventTime"), metadata.get("creationTimestamp"))
                if (time := parse_time(value)) is not None
            ),
            EPOCH,
        )
        words = f"{event.get('reason', '')}: {event.get('message', '')}"[:MAX_WORDS]
        if newest is None or when >= newest[0]:
            newest = (when, words)
    return None if newest is None else newest[1]


def with_claims(
    job: DistTrainJob, status: DistTrainJobStatus, unbound: Mapping[str, str], now: datetime
) -> DistTrainJobStatus:
    """The status with `VolumeUnbound` True while a claim waits with its StorageClass's words
    (`unbound`: claim name to words), False once none does; a job that never had one carries no such
    condition."""
    had = any(condition.type is ConditionType.VOLUME_UNBOUND for condition in status.conditions)
    if not unbound and not had:
        return status
    if unbound:
        said = "; ".join(
            f"the PersistentVolumeClaim {name} is not bound: {words}" for name, words in sorted(unbound.items())
        )
        verdict = Verdict(UNBOUND, said)
    else:
        verdict = Verdict(BOUND, "every PersistentVolumeClaim of the job is bound")
    conditions = with_condition(
        status.conditions,
        ConditionType.VOLUME_UNBOUND,
        holds=bool(unbound),
        verdict=verdict,
        now=now,
        generation=job.metadata.generation,
    )
    return status.model_copy(update={"conditions": conditions})
