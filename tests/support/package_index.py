"""A package index in a folder, as pip reads one (`--index-url file:///...`, PEP 503's layout), holding wheels
made here: what a test installs at a job's start without reaching any registry."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def package_index(folder: Path, name: str, version: str, module: str, source: str) -> str:
    """An index under `folder` serving one pure-Python wheel of `name` whose one module holds `source`;
    the index's URL for pip's `--index-url`."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{module}.py": source,
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: disttrain-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in files.items()]
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    project = folder / name
    project.mkdir(parents=True, exist_ok=True)
    wheel = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(project / wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    (project / "index.html").write_text(f'<a href="{wheel}">{wheel}</a>\n')
    return folder.as_uri()
