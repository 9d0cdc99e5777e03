"""A comment or docstring that names a file or folder of this repository names one that exists: a reader
follows such a path, and one left behind by a move sends them nowhere."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

from support.repository import ROOT

# A path with a slash that names a file by its extension, or a folder by its closing slash.
PATH = re.compile(r"(?<![\w./:@-])((?:\.{1,2}/)?(?:[\w.-]+/)+[\w.-]*)")
NAMED = re.compile(r"\.(py|md|yaml|yml|sh|json|toml|txt|cfg|ts|tsx)$|/$")
COMMENTED = (".sh", ".yaml", ".yml", ".toml", "Dockerfile", ".ci/run")
OUTSIDE = ("shared/",)  # the folder beside every checkout, which the docs name from the repository


def _tracked() -> tuple[set[str], set[str]]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = set(listed.stdout.split())
    folders = {str(Path(name).parents[index]) for name in files for index in range(len(Path(name).parents) - 1)}
    return files, folders


def _commentary(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each comment and docstring-like string of a Python file, or each `#` comment elsewhere."""
    text = path.read_text()
    if path.suffix != ".py":
        for number, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield number, line[line.index("#") :]
        return
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (token.type == tokenize.STRING and token.string.endswith(('"""', "'''"))):
            yield token.start[0], token.string


def _names_nothing(token: str, source: str, files: set[str], folders: set[str]) -> bool:
    first = token.split("/", 1)[0]
    if "/" not in token.rstrip("/"):  # one word and a slash: a folder the code makes (pods/), not a path
        return False
    if "." in first.strip(".") or token.startswith(OUTSIDE):  # a module path such as k8s.io/..., or outside
        return False
    if token.startswith(("./", "../")):
        resolved = (ROOT / source).parent / token
        return not resolved.exists()
    wanted = token.rstrip("/")
    return not any(name == wanted or name.endswith(f"/{wanted}") for name in files | folders)


def test_every_path_a_comment_names_exists() -> None:
    files, folders = _tracked()
    checked = [name for name in sorted(files) if name.endswith((".py", *COMMENTED))]
    nowhere = []
    for source in checked:
        for line, text in _commentary(ROOT / source):
            for match in PATH.finditer(text):
                token = match.group(1).rstrip(".,:;)")
                if NAMED.search(token) and _names_nothing(token, source, files, folders):
                    nowhere.append(f"{source}:{line}: {token}")
    assert not nowhere, "comments name paths that do not exist:\n" + "\n".join(nowhere)


MOST_DOCSTRING_LINES = 15
FIGURE = re.compile(r"\b\d+(\.\d+)? ?(ms|MB|MiB|GB|%)(?!\w)|\b\d+(\.\d+)? of the peer's")


def test_the_packages_docstrings_are_short_and_quote_no_measured_figure() -> None:
    """What a module, class or function is and why, in a few lines; the figures that decided a design live in
    docs/benchmarks.md and docs/architecture.md, where they are dated and can be measured again."""
    found = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node, clean=False) or ""
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}"
                if docstring.count("\n") >= MOST_DOCSTRING_LINES:
                    found.append(f"{where}: {docstring.count(chr(10)) + 1} lines")
                if FIGURE.search(docstring):
                    found.append(f"{where}: quotes {FIGURE.search(docstring).group(0)!r}")  # type: ignore[union-attr]
    assert not found, "\n".join(found)
