"""Restarts: when a job restarts, how far, how, whether it counts, and when it fails instead.

`rules` answers what one failure calls for (the failure policy, divergence, the restart policy); `stalls` says
when a job that makes no step is stalled; `decision` gives the planner its one answer per reconcile;
`in_place` restarts trainers in their pods on the kubelet's container rules; `record` writes a restart into the
job's status, and the pause quick restarts earn. The operator carries the answer out.
"""
