"""The Headlamp plugin: its kit's own checks (type check, lint, vitest, package), then the plugin in a
real Headlamp (its server built from its Go module, its frontend from npm) against the local cluster,
driven in Debian's Chromium. The screenshots in docs/headlamp.md are the ones taken here."""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from disttrain_dev import headlamp
from support.kube_cluster import Cluster
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods
from support.repository import ROOT

PLUGIN = ROOT / headlamp.PLUGIN_FOLDER
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "docs" / "images"
MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
WAIT_MS = 90_000


def _npm(*args: str) -> str:
    result = subprocess.run(["npm", *args], cwd=PLUGIN, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def built_plugin() -> Path:
    problem = headlamp.missing_requirement()
    if problem is not None:
        pytest.skip(problem)
    return headlamp.build_plugin(PLUGIN)


def test_the_plugin_passes_its_kits_checks_and_packages_as_headlamp_expects(built_plugin: Path, tmp_path: Path) -> None:
    _npm("run", "tsc")
    _npm("run", "lint")
    assert "6 passed" in _npm("test")
    _npm("run", "package", "--", ".", str(tmp_path))
    (tarball,) = tmp_path.glob("*.tar.gz")
    assert tarball.name == "disttrain-headlamp-plugin-0.1.0.tar.gz"
    with tarfile.open(tarball) as archive:
        assert sorted(archive.getnames()) == [
            "disttrain-headlamp-plugin",
            "disttrain-headlamp-plugin/main.js",
            "disttrain-headlamp-plugin/package.json",
        ]
    assert built_plugin.stat().st_size > 1000


@pytest.fixture(scope="module")
def headlamp_url(cluster: Cluster, built_plugin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Headlamp of our own build with the plugin, on loopback; the URL of the local cluster in it."""
    plugins = headlamp.plugins_folder(PLUGIN, tmp_path_factory.mktemp("headlamp-plugins"))
    with headlamp.serving(headlamp.ensure_headlamp(), cluster.kubeconfig, plugins) as url:
        yield f"{url}/c/{json.loads(cluster.kubeconfig.read_text())['current-context']}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        yield launched
        launched.close()


def test_headlamp_lists_jobs_with_disttrains_columns_and_shows_a_job(
    cluster: Cluster, operator: OperatorProcess, namespace: str, headlamp_url: str, browser: Browser
) -> None:
    cluster.apply(namespace, MWMS)
    running_pods(cluster, namespace, "mnist-mwms", 4)
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    try:
        page.goto(f"{headlamp_url}/disttrain/jobs")
        row = page.locator("tr", has_text="mnist-mwms").filter(has_text=namespace)
        expect(row).to_contain_text("Running", timeout=WAIT_MS)
        expect(row).to_contain_text("4/4")
        headers = page.locator("thead")
        for column in ("Name", "Namespace", "Phase", "Ready", "Restarts", "Progress", "Queue", "Age"):
            expect(headers).to_contain_text(column)
        page.screenshot(path=str(SCREENSHOTS / "headlamp-jobs.png"), full_page=True)

        row.get_by_role("link", name="mnist-mwms").click()
        expect(page.get_by_text("MultiWorkerMirrored")).to_be_visible(timeout=WAIT_MS)
        expect(page.get_by_text("Worker 4/4")).to_be_visible()
        expect(page.get_by_text("Evaluation", exact=True).first).to_be_visible()  # as `disttrain jobs describe` has it
        expect(page.get_by_role("link", name="mnist-mwms-worker-3", exact=True)).to_be_visible()  # the pod table
        kept = f"disttrain jobs logs mnist-mwms -n {namespace} --replica worker-3"
        expect(page.get_by_text(kept)).to_be_visible()
        expect(page.get_by_text("ChildrenCreated").first).to_be_visible()
        page.screenshot(path=str(SCREENSHOTS / "headlamp-job.png"), full_page=True)
    finally:
        page.close()
