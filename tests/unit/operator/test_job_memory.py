"""What the operator remembers of a job: what was acted on of a pod goes with the pod (its uid and the runs that
ended in it), and a TensorBoard refusal holds for the generation it was made for."""

from __future__ import annotations

from disttrain_core.restarts.in_place import run_key
from disttrain_core.types import Verdict
from disttrain_operator.job_memory import JobMemory


def test_what_was_acted_on_of_pods_gone_is_forgotten_and_of_pods_present_kept() -> None:
    memory = JobMemory(handled={"a", run_key("a", 2), "b", run_key("b", 1), run_key("c", 3)}, forced={"b", "c"})
    memory.forget_pods_beyond({"a", "c"})
    assert memory.handled == {"a", run_key("a", 2), run_key("c", 3)}
    assert memory.forced == {"c"}


def test_a_tensorboard_refusal_holds_for_its_generation_alone() -> None:
    refused = Verdict("TensorBoardRefused", "no image")
    memory = JobMemory(tensorboard_refused=(3, refused))
    assert memory.tensorboard_refusal(3) == (3, refused)
    assert memory.tensorboard_refusal(4) is None
    assert memory.tensorboard_refused is None
