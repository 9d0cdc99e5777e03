"""What the process node makes of a pod, as pure functions: the processes to run, the names they
resolve, and the status a kubelet would report. `process_node` does the I/O.

A pod's containers become host processes: the command and args (images are not pulled, so a
container must name its command, which runs in the node agent's own environment), the env with
`fieldRef`s resolved, the working directory, and its volume mounts of PVCs, hostPaths, emptyDirs and
ConfigMaps mapped to local folders (a ConfigMap's keys written there as files, as the kubelet projects
them; the ServiceAccount token is not mounted). Its termination message path is mapped to a file per
container, through the trainer's `DISTTRAIN_TERMINATION_MESSAGE_PATH` (the process cannot write to the
real path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from disttrain.local.containers import UnsupportedContainerError, command_line, environment
from disttrain_contract.progress import DEFAULT_TERMINATION_MESSAGE_PATH, TERMINATION_MESSAGE_ENV
from disttrain_contract.timestamps import format_time
from disttrain_core.observed import CRASH_LOOP_BACK_OFF

Manifest = dict[str, Any]
CLUSTER_DOMAIN = "cluster.local"
MESSAGE_LIMIT = 4096


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str


@dataclass(frozen=True)
class ProcessSpec:
    container: str
    argv: tuple[str, ...]
    env: dict[str, str]
    working_dir: str | None
    mounts: tuple[Mount, ...]
    termination_message: Path
    log: Path


@dataclass(frozen=True)
class PodFolders:
    """Where one pod's files live on this machine."""

    pod: Path  # logs, termination messages, emptyDirs
    volumes: Path  # one folder per PersistentVolume, shared by every pod whose claim is bound to it


def _fields(pod: Mapping[str, Any], pod_ip: str) -> dict[str, str]:
    """The pod fields a `fieldRef` may name here."""
    return {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"]["namespace"],
        "metadata.uid": pod["metadata"].get("uid", ""),
        "spec.nodeName": pod["spec"].get("nodeName", ""),
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", ""),
        "status.podIP": pod_ip,
    }


def _is_api_token(volume: Mapping[str, Any]) -> bool:
    """The ServiceAccount token volume the API server adds: processes here get no API credentials."""
    sources = (volume.get("projected") or {}).get("sources") or []
    return any("serviceAccountToken" in source for source in sources)


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if "persistentVolumeClaim" in v
    ]


def config_map_sources(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The `configMap` source of each such volume of the pod."""
    return [v["configMap"] for v in pod["spec"].get("volumes") or [] if "configMap" in v]


def config_map_files(
    pod: Mapping[str, Any], folders: PodFolders, config_maps: Mapping[str, Mapping[str, str]]
) -> dict[Path, str]:
    """The files of the pod's ConfigMap volumes, by the ConfigMaps' data: every key as a file of its name, or
    the `items` named, each at its path."""
    files: dict[Path, str] = {}
    for volume in pod["spec"].get("volumes") or []:
        source = volume.get("configMap")
        if source is None:
            continue
        data = config_maps.get(source["name"]) or {}
        items = source.get("items") or [{"key": key, "path": key} for key in data]
        for item in items:
            if item["key"] in data:
                files[folders.pod / "volumes" / volume["name"] / item["path"]] = data[item["key"]]
    return files


def _volume_sources(pod: Mapping[str, Any], folders: PodFolders, bound: Mapping[str, str]) -> dict[str, Path | None]:
    """Each volume's local folder; None for the API token volume, which is not mounted.

    `bound` maps claim names to their PersistentVolumes: a new claim of the same name starts empty.
    """
    sources: dict[str, Path | None] = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            sources[name] = folders.volumes / bound[volume["persistentVolumeClaim"]["claimName"]]
        elif "hostPath" in volume:
            sources[name] = Path(volume["hostPath"]["path"])
        elif "emptyDir" in volume or "configMap" in volume:
            sources[name] = folders.pod / "volumes" / name
        elif _is_api_token(volume):
            sources[name] = None
    return sources


def process_specs(
    pod: Mapping[str, Any], pod_ip: str, folders: PodFolders, bound: Mapping[str, str]
) -> list[ProcessSpec]:
    """One process per container of the pod, in order; UnsupportedContainerError names what cannot run."""
    sources = _volume_sources(pod, folders, bound)
    fields = _fields(pod, pod_ip)
    specs = []
    for container in pod["spec"]["containers"]:
        name = container["name"]
        argv = command_line(container)
        mounts = []
        for mount in container.get("volumeMounts") or []:
            if mount["name"] not in sources:
                raise UnsupportedContainerError(
                    f"volume {mount['name']}: only PVCs, hostPaths, emptyDirs and ConfigMaps mount here"
                )
            source = sources[mount["name"]]
            if source is not None:
                mounts.append(Mount(source, mount["mountPath"]))
        message = folders.pod / f"{name}.termination-log"
        env = environment(container, fields)
        if env.get(TERMINATION_MESSAGE_ENV) == container.get(
            "terminationMessagePath", DEFAULT_TERMINATION_MESSAGE_PATH
        ):
            env[TERMINATION_MESSAGE_ENV] = str(message)
        specs.append(
            ProcessSpec(
                container=name,
                argv=argv,
                env=env,
                working_dir=container.get("workingDir"),
                mounts=tuple(mounts),
                termination_message=message,
                log=folders.pod / f"{name}.log",
            )
        )
    return specs


def host_names(pod: Mapping[str, Any]) -> list[str]:
    """The names a pod answers to: with a subdomain (a headless Service), its DNS records too."""
    metadata, spec = pod["metadata"], pod["spec"]
    hostname = spec.get("hostname") or metadata["name"]
    subdomain = spec.get("subdomain")
    if not subdomain:
        return [hostname]
    base = f"{hostname}.{subdomain}.{metadata['namespace']}.svc"
    return [f"{base}.{CLUSTER_DOMAIN}", base, hostname]


def service_names(pod: Mapping[str, Any], services: Iterable[Mapping[str, Any]]) -> list[str]:
    """The names of the headless Services that select the pod, as the cluster's DNS publishes them: a
    Service per pod, as training-operator makes for each replica, resolves to that pod."""
    metadata = pod["metadata"]
    labels = metadata.get("labels") or {}
    names = []
    for service in services:
        spec, where = service.get("spec") or {}, service["metadata"]
        selector = spec.get("selector") or {}
        if where.get("namespace") != metadata["namespace"] or spec.get("clusterIP") != "None" or not selector:
            continue
        if all(labels.get(key) == value for key, value in selector.items()):
            base = f"{where['name']}.{where['namespace']}.svc"
            names += [f"{base}.{CLUSTER_DOMAIN}", base]
    return names


def hosts_file(addresses: Iterable[tuple[str, Sequence[str]]]) -> str:
    """/etc/hosts for a pod: loopback, then every running pod of this node by address."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{address}\t{' '.join(names)}" for address, names in sorted(addresses)]
    return "\n".join(lines) + "\n"


def _time(moment: datetime) -> str:
    return format_time(moment)


@dataclass(frozen=True)
class ContainerState:
    """One container as the node sees it: running since `started` (`ready` once its readiness probe, if it has
    one, succeeded), or ended with `exit_code`."""

    name: str
    started: datetime
    restarts: int = 0
    exit_code: int | None = None
    finished: datetime | None = None
    message: str = ""
    last_exit_code: int | None = None  # how its last run ended, where it restarted: the code, its times and words
    last_started: datetime | None = None
    last_finished: datetime | None = None
    last_message: str = ""
    ready: bool = True
    restarted_with_all: bool = False  # its last run ended as the pod's RestartAllContainers stopped it
    backing_off: str = ""  # the kubelet's words while it holds the ended run's restart back (CrashLoopBackOff)


def container_status(state: ContainerState, image: str) -> Manifest:
    status: Manifest = {
        "name": state.name,
        "image": image,
        "imageID": "",
        "restartCount": state.restarts,
        "ready": state.exit_code is None and state.ready,
        "started": state.exit_code is None,
    }
    if state.exit_code is None:
        status["state"] = {"running": {"startedAt": _time(state.started)}}
    elif state.backing_off:  # the run that ended is the last state until the next one starts
        status["state"] = {"waiting": {"reason": CRASH_LOOP_BACK_OFF, "message": state.backing_off}}
        status["lastState"] = {"terminated": _terminated(state)}
        return status
    else:
        status["state"] = {"terminated": _terminated(state)}
    if state.restarted_with_all:  # the kubelet's words for every container it restarts so
        status["lastState"] = {
            "terminated": {"exitCode": KILLED, "reason": ALL_RESTARTING_REASON, "message": ALL_RESTARTING}
        }
    elif state.last_exit_code is not None:
        last: Manifest = {
            "exitCode": state.last_exit_code,
            "reason": "Completed" if not state.last_exit_code else "Error",
        }
        if state.last_started is not None and state.last_finished is not None:
            last |= {"startedAt": _time(state.last_started), "finishedAt": _time(state.last_finished)}
        if state.last_message:
            last["message"] = state.last_message[:MESSAGE_LIMIT]
        status["lastState"] = {"terminated": last}
    return status


def _terminated(state: ContainerState) -> Manifest:
    assert state.exit_code is not None
    terminated: Manifest = {
        "exitCode": state.exit_code,
        "reason": "Completed" if state.exit_code == 0 else "Error",
        "startedAt": _time(state.started),
        "finishedAt": _time(state.finished or state.started),
    }
    if state.message:
        terminated["message"] = state.message[:MESSAGE_LIMIT]
    return terminated


def pod_phase(states: Sequence[ContainerState], restart_policy: str) -> str:
    """Running while any container runs or will restart; then Succeeded if every one exited 0."""
    if any(state.exit_code is None or state.backing_off for state in states):
        return "Running"
    if all(state.exit_code == 0 for state in states):
        return "Succeeded"
    return "Running" if restart_policy == "Always" else "Failed"


def pod_status(
    pod: Mapping[str, Any], states: Sequence[ContainerState], pod_ip: str, host_ip: str, started: datetime
) -> Manifest:
    """The pod's status as a kubelet writes it: phase, addresses, conditions and container states."""
    images = {container["name"]: container.get("image", "") for container in pod["spec"]["containers"]}
    phase = pod_phase(states, pod["spec"].get("restartPolicy", "Always"))
    ready = "True" if phase == "Running" and all(s.exit_code is None and s.ready for s in states) else "False"
    now = _time(max([started, *(s.finished or s.started for s in states)]))
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": _time(started)},
        {"type": "Initialized", "status": "True", "lastTransitionTime": _time(started)},
        {"type": "ContainersReady", "status": ready, "lastTransitionTime": now},
        {"type": "Ready", "status": ready, "lastTransitionTime": now},
    ]
    if any(state.restarted_with_all for state in states):  # done restarting: the kubelet leaves it False
        conditions.append({"type": "AllContainersRestarting", "status": "False", "lastTransitionTime": now})
    return {
        "phase": phase,
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": _time(started),
        "conditions": conditions,
        "containerStatuses": [container_status(state, images.get(state.name, "")) for state in states],
    }


def failed_status(reason: str, message: str) -> Manifest:
    """A pod that could not start (or was lost when the node restarted): Failed, without exit codes."""
    return {"phase": "Failed", "reason": reason, "message": message[:MESSAGE_LIMIT]}


def restarts(restart_policy: str, exit_code: int) -> bool:
    return restart_policy == "Always" or (restart_policy == "OnFailure" and exit_code != 0)


RESTART = "Restart"
RESTART_ALL = "RestartAllContainers"
KILLED = 137
ALL_RESTARTING_REASON = "RestartingAllContainers"
ALL_RESTARTING = "The container is removed because RestartAllContainers in place"


FIRST_BACKOFF = 10.0
LONGEST_BACKOFF = 300.0


@dataclass(frozen=True)
class RestartBackoff:
    """The kubelet's back-off of one container's restarts (client-go's `flowcontrol.Backoff`, 10 s doubling to
    5 minutes): a restart starts at once unless the last one was within 10 minutes before this run ended;
    then it waits the current delay from that end, and the delay doubles. Times are the node's monotonic clock."""

    delay: float = 0.0  # 0: no restart remembered
    updated: float = 0.0  # when the run that the last restart followed ended

    def _expired(self, finished: float) -> bool:
        return not self.delay or finished - self.updated > 2 * LONGEST_BACKOFF

    def wait(self, finished: float) -> float:
        """Seconds after `finished` (a run's end) before the container may start again."""
        return 0.0 if self._expired(finished) else self.delay

    def next(self, finished: float) -> RestartBackoff:
        """The back-off once the run that ended at `finished` is restarted."""
        if self._expired(finished):
            return RestartBackoff(FIRST_BACKOFF, finished)
        return RestartBackoff(min(self.delay * 2, LONGEST_BACKOFF), finished)


def backing_off_message(seconds: float, container: str, pod: Mapping[str, Any]) -> str:
    """The kubelet's words in the waiting state of a container it holds back."""
    metadata = pod["metadata"]
    return (
        f"back-off {int(seconds)}s restarting failed container={container}"
        f" pod={metadata['name']}_{metadata['namespace']}({metadata['uid']})"
    )


def restart_action(pod_restart_policy: str, container: Mapping[str, Any], exit_code: int) -> str | None:
    """What a kubelet does when `container` exits with `exit_code`: its first `restartPolicyRules` entry whose
    exit codes match decides (`Restart`: it alone starts again; `RestartAllContainers`: every container of the
    pod starts again, in place); else its own `restartPolicy`, else the pod's, restarts it or not (None)."""
    for rule in container.get("restartPolicyRules") or []:
        codes = rule.get("exitCodes") or {}
        listed = exit_code in (codes.get("values") or [])
        if listed == (codes.get("operator") == "In"):
            return str(rule.get("action"))
    return RESTART if restarts(container.get("restartPolicy") or pod_restart_policy, exit_code) else None
