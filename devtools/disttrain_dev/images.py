"""The project's images, built on a machine that reaches no image registry.

The Python base is made from Debian packages (debootstrap, then a venv at /usr/local so that `python`
and `pip` behave as in the official images) and imported into Docker; the operator and trainer images
are built from the project's own Dockerfiles, unchanged, with only that base passed in
(`--build-arg PYTHON_IMAGE`). Each image is tagged with a digest of its inputs (the Dockerfile, the
files it copies, the base) and built again only when that digest is new; it is also tagged with the
version the manifests name (`disttrain/trainer:0.1.0`). `--gpu` builds the GPU trainer too,
`disttrain/trainer:0.1.0-gpu` (TensorFlow's `and-cuda` wheels: several GB).

Needs root and a running Docker engine; pip inside the builds reaches the package index through the
host's network (`--network host`) with this machine's CA bundle. What the tools print goes to stderr;
`python -m disttrain_dev.images --output FILE` writes the images built to FILE, for scripts to read.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from disttrain_core.images import VERSION
from disttrain_dev.tool_run import STDERR, run_tool
from disttrain_dev.versions import cache_root

DEBIAN_SUITE = "bookworm"
# No python3-pip: the venv at /usr/local gets pip from python3-venv, and images that uninstall it (the
# operator's) must then hold none, as with the official python images.
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_NAME = "disttrain/python-base"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
APT_SOURCES = (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"))


@dataclass(frozen=True)
class Image:
    name: str  # e.g. disttrain/operator
    dockerfile: str  # relative to the repository root, which is the build context
    build_args: tuple[tuple[str, str], ...] = ()  # beside PYTHON_IMAGE
    variant: str = ""  # the version tag's suffix: `gpu` tags disttrain/trainer:0.1.0-gpu

    def tag(self, digest: str) -> str:
        return f"{self.name}:inputs-{digest[:16]}"

    @property
    def version_tag(self) -> str:
        return f"{self.name}:{VERSION}{f'-{self.variant}' if self.variant else ''}"


def _constraint(package: str) -> str:
    """The version constraints.txt pins `package` at: the one the tests passed with."""
    for line in (Path(__file__).resolve().parents[2] / "constraints.txt").read_text().splitlines():
        if line.startswith(f"{package}=="):
            return line.split("==", 1)[1].strip()
    raise RuntimeError(f"constraints.txt pins no {package}")


OPERATOR = Image("disttrain/operator", "Dockerfile")
TRAINER = Image("disttrain/trainer", "trainer_image/Dockerfile")
# TensorFlow's full wheel with its CUDA and cuDNN libraries as pip packages (`and-cuda`), at the CPU wheel's
# version: the node needs only NVIDIA's driver. Its wheels are several GB, so it is built only when asked.
GPU_TRAINER = Image(
    "disttrain/trainer",
    "trainer_image/Dockerfile",
    build_args=(("TENSORFLOW", f"tensorflow[and-cuda]=={_constraint('tensorflow-cpu')}"),),
    variant="gpu",
)


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    """The instructions of each stage, from its FROM on."""
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions(dockerfile):
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def copied_sources(dockerfile: Path) -> list[str]:
    """What the Dockerfile copies from the build context (COPY without --from), relative to it."""
    sources: list[str] = []
    for instruction, arguments in instructions(dockerfile):
        words = arguments.split()
        if instruction == "COPY" and not any(word.startswith("--from") for word in words):
            sources.extend(words[:-1])
    return sources


def _files(root: Path, source: str) -> Iterator[Path]:
    path = root / source
    if path.is_file():
        yield path
        return
    for found in sorted(path.rglob("*")):
        ignored = {"__pycache__", "build"} & set(found.parts) or any(p.endswith(".egg-info") for p in found.parts)
        if found.is_file() and not ignored:
            yield found


def input_digest(root: Path, image: Image, base: str) -> str:
    """A digest of everything the image is built from: its Dockerfile, what it copies, and the base."""
    digest = hashlib.sha256("\0".join([base, *(f"{name}={value}" for name, value in image.build_args)]).encode())
    dockerfile = root / image.dockerfile
    for path in [dockerfile, *(f for source in copied_sources(dockerfile) for f in _files(root, source))]:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _docker_quietly(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], check=check, text=True, capture_output=True)


def has_image(tag: str) -> bool:
    return _docker_quietly("image", "inspect", tag, check=False).returncode == 0


def debian_mirror() -> str:
    """The Debian mirror apt already uses here (a deb822 `URIs:` or a one-line `deb` source)."""
    for path in APT_SOURCES:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and not words[1].rstrip("/").endswith("-security"):
                return words[1]
            if words[:1] == ["deb"] and not words[1].startswith("["):
                return words[1]
    raise RuntimeError("no Debian mirror found in apt's sources: debootstrap needs one")


def base_tag() -> str:
    key = hashlib.sha256("|".join((DEBIAN_SUITE, *BASE_PACKAGES)).encode()).hexdigest()[:12]
    return f"{BASE_NAME}:{DEBIAN_SUITE}-{key}"


def ensure_base() -> str:
    """The Python base image, made from Debian packages once per suite and package list."""
    tag = base_tag()
    if has_image(tag):
        return tag
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is needed to make the base image (apt-get install debootstrap)")
    root = cache_root() / "images" / "python-base"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    run_tool(["debootstrap", "--variant=minbase", DEBIAN_SUITE, str(root), debian_mirror()])
    shutil.copy(CA_BUNDLE, root / "host-ca-certificates.crt")
    script = (
        "set -e; export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; "
        f"apt-get install -y -qq --no-install-recommends {' '.join(BASE_PACKAGES)}; "
        "apt-get clean; rm -rf /var/lib/apt/lists/*; "
        "mv /host-ca-certificates.crt /etc/ssl/certs/ca-certificates.crt; "
        "python3 -m venv /usr/local"
    )
    run_tool(["mount", "--bind", "/proc", str(root / "proc")])
    try:
        run_tool(["chroot", str(root), "/bin/sh", "-c", script], env={"PATH": os.environ["PATH"]})
    finally:
        subprocess.run(["umount", str(root / "proc")], check=False, stdout=STDERR)
    environment = "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8"
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    run_tool(["docker", "import", "-c", environment, "-", tag], stdin=tar.stdout)
    tar.wait()
    shutil.rmtree(root, ignore_errors=True)
    return tag


def ensure_image(root: Path, image: Image, base: str) -> str:
    """Build the image from its Dockerfile unless an image of the same inputs exists; its inputs tag."""
    tag = image.tag(input_digest(root, image, base))
    if not has_image(tag):
        build = ["build", "--network", "host", "--build-arg", f"PYTHON_IMAGE={base}", "-f", image.dockerfile]
        build += [argument for name, value in image.build_args for argument in ("--build-arg", f"{name}={value}")]
        run_tool(["docker", *build, "-t", tag, str(root)])
    _docker_quietly("tag", tag, image.version_tag)
    return tag


def ensure_images(root: Path) -> dict[str, str]:
    """The base, operator and trainer images; name -> the tag of its inputs."""
    base = ensure_base()
    return {image.name: ensure_image(root, image, base) for image in (OPERATOR, TRAINER)}


def ensure_gpu_trainer(root: Path) -> str:
    """The GPU trainer image (`GPU_TRAINER`); the tag of its inputs."""
    return ensure_image(root, GPU_TRAINER, ensure_base())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m disttrain_dev.images", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output", type=Path, help="write the images built to this file, one `name tag` line each (default: stdout)"
    )
    parser.add_argument("--gpu", action="store_true", help=f"also {GPU_TRAINER.version_tag}, TensorFlow with CUDA")
    args = parser.parse_args(argv)
    try:
        root = Path(__file__).resolve().parents[2]
        built = ensure_images(root)
        if args.gpu:
            built[GPU_TRAINER.version_tag] = ensure_gpu_trainer(root)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        sys.exit(f"error: {error}")  # what the tool itself said is above, on stderr
    lines = "".join(f"{name} {tag}\n" for name, tag in built.items())
    if args.output is None:
        sys.stdout.write(lines)
    else:
        args.output.write_text(lines)


if __name__ == "__main__":
    main()
