"""Which tf.distribute strategy a process uses: from TF_CONFIG unless a flag says otherwise."""

from __future__ import annotations

import os

import tensorflow as tf

from disttrain_contract.exit_codes import ExitCode, TrainerError
from disttrain_trainer.config import Role, TrainConfig

TRANSIENT_PS_FAILURES = 50


def configure_devices(config: TrainConfig) -> None:
    """Split the CPU into logical devices (before TensorFlow starts): multi-device code on a CPU machine."""
    if config.logical_cpus > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * config.logical_cpus)


def local_devices() -> list[str]:
    """The GPUs of this process, else its (logical) CPUs."""
    gpus = tf.config.list_logical_devices("GPU")
    return [device.name for device in (gpus or tf.config.list_logical_devices("CPU"))]


def strategy_name(config: TrainConfig) -> str:
    """`auto`: a ps job means ParameterServer, several training tasks MultiWorkerMirrored, several
    local devices Mirrored, and otherwise the default (single-device) strategy."""
    if config.strategy != "auto":
        return config.strategy
    role: Role = config.role
    if role.has_ps:
        return "parameter-server"
    if role.training_workers > 1:
        return "multi-worker-mirrored"
    if len(local_devices()) > 1 and config.model_parallel == 1:
        return "mirrored"
    return "default"


def create(name: str, config: TrainConfig) -> tf.distribute.Strategy:
    if config.model_parallel > 1 and name != "default":
        raise TrainerError(ExitCode.BAD_FLAGS, f"--model-parallel needs the default strategy, not {name}")
    if name == "multi-worker-mirrored":
        implementation = getattr(tf.distribute.experimental.CommunicationImplementation, config.collective)
        options = tf.distribute.experimental.CommunicationOptions(implementation=implementation)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=local_devices())
    if name == "central-storage":
        return tf.distribute.experimental.CentralStorageStrategy(
            compute_devices=local_devices(), parameter_device="/cpu:0"
        )
    if name == "parameter-server":
        # While a replaced worker's server starts, the PS relays "connection refused" to the coordinator,
        # which then takes the worker's loss for a PS failure and gives up after 3 such reports (TF's
        # default). Tolerate more of them: a PS that is really gone still fails the chief within seconds.
        # A step cut short by a lost worker can also surface as an UnknownError "Graph execution error":
        # TF treats it as the worker failure it is only when asked to.
        os.environ.setdefault("TF_COORDINATOR_IGNORE_TRANSIENT_PS_FAILURES", str(TRANSIENT_PS_FAILURES))
        os.environ.setdefault("TF_PS_HANDLE_UNKNOWN_ERROR", "1")
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(resolver)
    return tf.distribute.get_strategy()
