"""Leader election's decisions and lease records; the real race runs in test_faults.py (the standby replica
takes over mid-job)."""

from __future__ import annotations

import socket
import time

import pytest
from kubernetes import client

from disttrain_cli.main import main
from disttrain_kube.api_errors import TransientApiError
from disttrain_kube.rest import Kube
from disttrain_operator.leader_election import Decision, LeaderElector, Timing, claimed, decide, released

HELD = {"holderIdentity": "a_1", "leaseDurationSeconds": 15, "renewTime": "t0", "leaseTransitions": 2}


@pytest.mark.parametrize(
    ("spec", "identity", "unchanged_for", "decision"),
    [
        (None, "b_1", 0.0, Decision.CREATE),
        (HELD, "a_1", 0.0, Decision.RENEW),
        (HELD, "b_1", 14.9, Decision.WAIT),  # the holder may still be renewing
        (HELD, "b_1", 15.0, Decision.TAKE),  # not renewed for a whole lease, on our own clock
        ({**HELD, "holderIdentity": None}, "b_1", 0.0, Decision.TAKE),  # released on shutdown
        ({**HELD, "holderIdentity": ""}, "b_1", 0.0, Decision.TAKE),
    ],
)
def test_decide(spec: dict[str, object] | None, identity: str, unchanged_for: float, decision: Decision) -> None:
    assert decide(spec, identity, unchanged_for) is decision


def test_a_renewal_keeps_the_acquire_time_and_the_transition_count() -> None:
    renewed = claimed({**HELD, "acquireTime": "t-1"}, "a_1", Decision.RENEW, lease_seconds=15, now="t1")
    assert renewed == {
        "holderIdentity": "a_1",
        "leaseDurationSeconds": 15,
        "acquireTime": "t-1",
        "renewTime": "t1",
        "leaseTransitions": 2,
    }


def test_a_takeover_counts_a_transition_and_a_new_lease_starts_at_zero() -> None:
    taken = claimed(HELD, "b_1", Decision.TAKE, lease_seconds=15, now="t1")
    assert (taken["holderIdentity"], taken["acquireTime"], taken["leaseTransitions"]) == ("b_1", "t1", 3)
    assert claimed(None, "b_1", Decision.CREATE, lease_seconds=15, now="t1")["leaseTransitions"] == 0


def test_a_released_lease_has_no_holder_and_expires_at_once() -> None:
    left = released(HELD)
    assert left["holderIdentity"] is None and left["leaseDurationSeconds"] == 1
    assert decide(left, "b_1", 0.0) is Decision.TAKE


def test_timing_must_renew_before_the_lease_runs_out() -> None:
    Timing(lease_seconds=15, renew_seconds=10, retry_seconds=2)
    with pytest.raises(ValueError, match="--renew-seconds"):
        Timing(lease_seconds=10, renew_seconds=10, retry_seconds=2)


def test_the_operator_command_refuses_bad_timing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["operator", "--leader-elect", "--lease-seconds", "5", "--renew-seconds", "6"])
    assert exit_info.value.code == 2
    assert "0 < --retry-seconds < --renew-seconds < --lease-seconds" in capsys.readouterr().err


def test_a_renewal_against_an_api_server_that_hangs_ends_within_what_is_left_of_its_deadline() -> None:
    """An API server that takes the connection and never answers: a renewal given the time left of the renew
    deadline (client-go's renewDeadline) gives up within it, so a leader stops acting before its lease could
    run out, while a renewal of a slow API server may still take up to that time."""
    silent = socket.create_server(("127.0.0.1", 0))
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{silent.getsockname()[1]}"
    configuration.retries = 0  # as the operator's elector has it (load_client(retries=0))
    elector = LeaderElector(
        Kube(client.ApiClient(configuration)), "disttrain-system", "a_1", timing=Timing(), on_lost=lambda: None
    )
    started = time.monotonic()
    with pytest.raises(TransientApiError):
        elector.try_once(seconds=1.0)
    waited = time.monotonic() - started
    silent.close()
    assert 0.4 < waited < 1.5  # the read's half of the second, and no hidden retry
