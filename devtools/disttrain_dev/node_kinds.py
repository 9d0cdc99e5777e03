"""The label (and taint key) that tells the local cluster's kinds of node apart; namespaces annotated
for a kind send their pods there (`cluster.node_namespace`)."""

NODE_KIND_LABEL = "disttrain.io/node-kind"
PROCESS = "process"  # pods run as host processes
REAL = "real"  # a kubelet and containerd


def taint(kind: str) -> dict[str, str]:
    """What keeps other pods off a node of `kind`; a namespace's default toleration matches it."""
    return {"key": NODE_KIND_LABEL, "value": kind, "effect": "NoSchedule"}
