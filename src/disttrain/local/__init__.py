"""A job on this machine: its replicas as local processes with the TF_CONFIG, volume and environment their
pods would get (`disttrain local run`), what a container is as a host process (the dev cluster's process
node runs pods so too), and loopback ports for them."""

from disttrain.local.functions import train

__all__ = ["train"]
