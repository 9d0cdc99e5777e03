"""Sources of systems the tests run that no registry serves (Kueue, Headlamp): tarballs kept beside the
checkout in the workspace's `shared/third_party/`, built once into a cache folder keyed by the
tarball's name, which names the upstream commit."""

from __future__ import annotations

import os
import shutil
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from disttrain_dev.versions import cache_root

FOLDER = Path(__file__).resolve().parents[3] / "shared" / "third_party"


@dataclass(frozen=True)
class SourceTarball:
    name: str  # e.g. kueue-ff69552e79-src.tar.gz
    env: str  # a variable that names another copy

    def path(self) -> Path:
        return Path(os.environ.get(self.env) or FOLDER / self.name)

    def cache(self) -> Path:
        """Where its build is kept."""
        return cache_root() / "devcluster" / self.name.removesuffix(".tar.gz")

    def unavailable(self, tools: tuple[str, ...]) -> str | None:
        """Why it cannot be built here (the tarball or a tool is missing), or None."""
        if not self.path().is_file():
            return f"the source {self.path()} is missing (set {self.env})"
        for tool in tools:
            if shutil.which(tool) is None:
                return f"{tool} is needed once to build {self.name}, and none is on PATH"
        return None

    def extract(self, folder: Path) -> Path:
        """A fresh copy of the source in `folder`."""
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with tarfile.open(self.path()) as archive:
            archive.extractall(folder, filter="data")
        return folder


def answers(url: str, timeout: float = 1) -> bool:
    """The URL answers 200: a server started in a test or a benchmark is up."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except OSError:
        return False
