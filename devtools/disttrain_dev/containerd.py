"""The real node's containerd, through its own client `ctr`: images copied in from Docker, and its
containers stopped when the cluster goes down (shims and their processes outlive containerd)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from disttrain_dev import images, pod_network, versions
from disttrain_dev.real_node import NodeFiles
from disttrain_dev.versions import CachePaths

K8S_NAMESPACE = "k8s.io"  # containerd's namespace for the CRI
IMAGE_ID_LABEL = "disttrain.io/docker-image-id"


def ctr(
    files: NodeFiles, node: CachePaths, *args: str, stdin: int | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """containerd's own client on the node's socket, in the CRI's namespace; a failure says what ctr said."""
    command = [str(node.binary("ctr")), "--address", str(files.containerd_socket), "--namespace", K8S_NAMESPACE, *args]
    result = subprocess.run(command, stdin=stdin, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()[:1000]}")
    return result


def _docker_image_id(tag: str) -> str:
    inspect = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True, check=True
    )
    return inspect.stdout.strip()


def _loaded_ids(files: NodeFiles, node: CachePaths) -> dict[str, str]:
    """containerd's images (by full name) -> the Docker image id they were loaded from."""
    loaded: dict[str, str] = {}
    for line in ctr(files, node, "images", "ls").stdout.splitlines()[1:]:
        words = line.split()
        for label in words[-1].split(","):
            key, _, value = label.partition("=")
            if key == IMAGE_ID_LABEL:
                loaded[words[0]] = value
    return loaded


def full_name(tag: str) -> str:
    """containerd's spelling of a Docker short name: `disttrain/trainer:x` -> `docker.io/disttrain/trainer:x`."""
    first = tag.split("/", 1)[0]
    if "/" in tag and ("." in first or ":" in first or first == "localhost"):
        return tag
    return f"docker.io/{tag}" if "/" in tag else f"docker.io/library/{tag}"


def load_images(files: NodeFiles, node: CachePaths, tags: list[str]) -> list[str]:
    """Copy Docker images into the node's containerd, skipping those already there with the same id; an
    image there under another name is only named anew (a copy of the trainer's image takes tens of seconds).

    Returns the tags it copied or named."""
    loaded = _loaded_ids(files, node)
    wanted = {tag: _docker_image_id(tag) for tag in tags}
    missing = [tag for tag, image_id in wanted.items() if loaded.get(full_name(tag)) != image_id]
    by_id = {image_id: name for name, image_id in loaded.items()}
    for tag in missing:
        if wanted[tag] in by_id:
            ctr(files, node, "images", "tag", "--force", by_id[wanted[tag]], full_name(tag))
            ctr(files, node, "images", "label", full_name(tag), f"{IMAGE_ID_LABEL}={wanted[tag]}")
    stale = [tag for tag in missing if wanted[tag] not in by_id]
    if stale:
        print(f"+ docker save {' '.join(stale)} | ctr images import -", file=sys.stderr, flush=True)
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["docker", "save", *stale], stdout=archive, check=True)
            archive.seek(0)
            ctr(files, node, "images", "import", "-", stdin=archive.fileno())
        for tag in stale:
            ctr(files, node, "images", "label", full_name(tag), f"{IMAGE_ID_LABEL}={wanted[tag]}")
    return missing


def ensure_pause_image(node: CachePaths) -> str:
    """The sandbox image, from the pause program built here, in Docker (then loaded like any image)."""
    if images.has_image(versions.PAUSE_IMAGE):
        return versions.PAUSE_IMAGE
    with tempfile.TemporaryDirectory() as context:
        (Path(context) / "pause").write_bytes(node.binary("pause").read_bytes())
        (Path(context) / "pause").chmod(0o755)
        (Path(context) / "Dockerfile").write_text(
            'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'
        )
        subprocess.run(["docker", "build", "-q", "-t", versions.PAUSE_IMAGE, context], check=True, capture_output=True)
    return versions.PAUSE_IMAGE


def stop_containers(files: NodeFiles, node: CachePaths) -> None:
    """Kill every container of the node before containerd stops: shims and their processes outlive it."""
    if not files.containerd_socket.exists():
        return
    tasks = [line.split()[0] for line in ctr(files, node, "tasks", "ls", check=False).stdout.splitlines()[1:]]
    for task in tasks:
        ctr(files, node, "tasks", "kill", "--signal", "SIGKILL", task, check=False)
    for task in tasks:
        ctr(files, node, "tasks", "delete", "--force", task, check=False)
    for name in ctr(files, node, "containers", "ls", "-q", check=False).stdout.split():
        ctr(files, node, "containers", "rm", name, check=False)
    _remove_pod_namespaces()


def stop_shims(files: NodeFiles) -> None:
    """Kill the shims of the node's containerd left once it stopped: a pod's shim stays, idle, after its tasks were
    killed and deleted (and after `ctr sandboxes rm`), one for each pod the cluster went down with."""
    address = f"-address\0{files.containerd_socket}\0".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if b"containerd-shim" in command.split(b"\0", 1)[0] and address in command + b"\0":
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


def _remove_pod_namespaces() -> None:
    """The network namespaces containerd made for pods (their address is in the CNI pool), with their veths."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for name in (line.split()[0] for line in listed.splitlines() if line.startswith("cni-")):
        addresses = subprocess.run(
            ["ip", "-n", name, "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False
        )
        if _in_pool(addresses.stdout):
            subprocess.run(["ip", "netns", "delete", name], check=False)


def _in_pool(listing: str) -> bool:
    for word in listing.split():
        if "/" in word:
            try:
                if ipaddress.ip_interface(word).ip in pod_network.CNI_POOL:
                    return True
            except ValueError:
                continue
    return False
