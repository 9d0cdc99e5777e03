"""What the operator did and its watches do not show yet: kept until shown or until it lapses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from disttrain_core.api.spec import ReplicaType
from disttrain_core.observed import PodPhase, PodView
from disttrain_core.types import ObjectRef
from disttrain_operator.expectations import EXPECTATION, Expectations

START = datetime(2026, 1, 1, tzinfo=UTC)
MADE = ObjectRef("Pod", "job-worker-0")
SERVICE = ObjectRef("Service", "job")


def _pod(*, deleting: bool = False) -> PodView:
    return PodView("job-worker-0", ReplicaType.WORKER, 0, PodPhase.RUNNING, uid="u0", deleting=deleting)


def test_a_child_made_is_expected_until_a_view_shows_it() -> None:
    expectations = Expectations()
    expectations.expect(MADE, START)
    expectations.expect(SERVICE, START)
    assert expectations.pending([], [], START) == {MADE, SERVICE}
    assert expectations.pending([_pod()], [], START) == {SERVICE}  # a pod is shown by the pod views
    assert expectations.pending([], [SERVICE], START) == set()
    assert expectations.pending([], [], START) == set()  # shown once is enough


def test_a_pod_deleted_is_expected_until_it_is_deleting_or_gone() -> None:
    expectations = Expectations()
    expectations.expect("u0", START)
    assert expectations.pending([_pod()], [], START) == {"u0"}
    assert expectations.pending([_pod(deleting=True)], [], START) == set()
    expectations.expect("u0", START)
    assert expectations.pending([], [], START) == set()


def test_what_never_shows_lapses_after_the_expectation_and_not_before() -> None:
    expectations = Expectations()
    expectations.expect(MADE, START)
    assert expectations.pending([], [], START + EXPECTATION) == {MADE}
    assert expectations.pending([], [], START + EXPECTATION + timedelta(seconds=1)) == set()
