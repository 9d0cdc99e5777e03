"""`disttrain dashboard --authenticate` in a real browser (Debian's Chromium, driven by Playwright) against
the local cluster, as deploy/components/dashboard installs it: its ServiceAccount may only review tokens,
and each viewer signs in with a token and sees what their own RBAC allows. A job goes from Pending to
Running to Succeeded while its list page stays open; its page shows conditions and curves; a failed
job's page says why; hostile text stays text; nothing can be written; a viewer without rights reads
why; a viewer of one namespace sees nothing of another, and a request without a token, or addressed to
another host, is refused. The screenshots in docs/admins.md are the ones these tests take."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from disttrain_dev.cluster import UNATTENDED_ANNOTATION
from support.job_builder import JobBuilder
from support.job_checks import TrainerProgress, holds, job_where
from support.kube_cluster import OPERATOR_TEST_NAMESPACE, Cluster, account_kubeconfig
from support.operator_process import OperatorProcess
from support.pod_checks import running_pods
from support.repository import ROOT

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "docs" / "images"
DASHBOARD_RBAC = ROOT / "deploy" / "components" / "dashboard" / "rbac.yaml"
VIEWER_ROLE = f"{OPERATOR_TEST_NAMESPACE}-disttrain-viewer"  # the component's, as account_kubeconfig renames it
MWMS = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
GATE_LABEL = "disttrain.io/dashboard-test"
HOSTILE = '<script>window.hacked = 1</script><img src=x onerror="window.hacked = 1">'
WAIT_MS = 60_000  # how long the page may take to show a change (the operator writes it first)

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")


class Dashboard:
    """`disttrain dashboard` as a user starts it, on a free port."""

    def __init__(self, kubeconfig: Path, *arguments: str) -> None:
        command = [sys.executable, "-m", "disttrain_cli.main", "dashboard", "--port", "0", *arguments]
        self.process = subprocess.Popen(
            command,
            env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.process.stderr.read() if self.process.stderr else ""

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        yield launched
        launched.close()


@pytest.fixture
def dashboard(cluster: Cluster, tmp_path: Path) -> Iterator[Dashboard]:
    """The dashboard as its kustomize component runs it: authenticating, with that component's ServiceAccount."""
    running = Dashboard(account_kubeconfig(cluster, tmp_path, DASHBOARD_RBAC, "disttrain-dashboard"), "--authenticate")
    yield running
    running.stop()


def viewer_token(cluster: Cluster, namespace: str, account: str, *viewed: str) -> str:
    """A token of a ServiceAccount that may view the namespaces `viewed` (with the component's viewer role)."""
    cluster.kubectl("create", "serviceaccount", account, "-n", namespace, check=False)
    for where in viewed:
        cluster.kubectl(
            "create", "rolebinding", f"{account}-views", "-n", where, f"--clusterrole={VIEWER_ROLE}",
            f"--serviceaccount={namespace}:{account}", check=False,
        )  # fmt: skip
    return cluster.kubectl("create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()


def sign_in(page: Page, dashboard: Dashboard, token: str) -> None:
    """As a person signs in: the form the dashboard shows without a token."""
    page.goto(dashboard.url)
    expect(page.locator("h1")).to_have_text("Sign in")
    page.locator("#token").fill(token)
    page.locator("button[type=submit]").click()
    # signed in: the list of jobs, of the one namespace the viewer may read where that is all they may
    expect(page).to_have_url(re.compile(rf"^{re.escape(dashboard.url)}(\?namespace=[a-z0-9-]+)?$"))


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    opened = browser.new_page(viewport={"width": 1280, "height": 800})
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: dialogs.append(dialog.message))
    yield opened
    opened.close()
    assert not dialogs, f"a script ran from a job's text: {dialogs}"


@pytest.fixture
def viewer(cluster: Cluster, namespace: str, dashboard: Dashboard, page: Page) -> Page:
    """The page, signed in as a viewer of the test's namespace."""
    sign_in(page, dashboard, viewer_token(cluster, namespace, "viewer", namespace))
    return page


def _gated(name: str, gate: str) -> str:
    """The example job, renamed, its pods held Pending until a node carries the gate's label."""
    text = MWMS.replace("name: mnist-mwms", f"name: {name}", 1)
    pod_spec = "\n          containers:"  # the template's, as the example indents it
    return text.replace(pod_spec, f"\n          nodeSelector: {{{GATE_LABEL}: '{gate}'}}{pod_spec}", 1)


@contextmanager
def _gate_opened(cluster: Cluster, gate: str) -> Iterator[None]:
    """A fake GPU node carries the gate's label while the block runs."""
    nodes = cluster.items("nodes", "")
    node = next(found for found in nodes if found["metadata"]["labels"].get("type") == "kwok")["metadata"]["name"]
    cluster.kubectl("label", "node", node, f"{GATE_LABEL}={gate}", "--overwrite")
    try:
        yield
    finally:
        cluster.kubectl("label", "node", node, f"{GATE_LABEL}-")


def _report_progress(cluster: Cluster, namespace: str, trainer: TrainerProgress) -> None:
    """Worker 0 reports three steps through the stand-in, each in the job's status before the next."""
    cluster.kubectl("annotate", "pod", "vision-worker-0", "-n", namespace, UNATTENDED_ANNOTATION)
    cluster.patch_pod_status(namespace, "vision-worker-0", {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]})
    for step, loss in [(10, 2.2), (20, 1.6), (30, 1.1)]:
        trainer.record = {"step": step, "totalSteps": 40, "loss": loss, "examplesPerSecond": 100.0 + step}
        job_where(
            cluster,
            namespace,
            "vision",
            f"step {step}",
            lambda j, s=step: j["status"].get("progress", {}).get("step") == s,
        )


def _screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def test_a_job_goes_from_pending_to_succeeded_on_an_open_page_and_shows_its_curves(
    cluster: Cluster, operator: OperatorProcess, namespace: str, dashboard: Dashboard, viewer: Page
) -> None:
    page = viewer
    page.goto(f"{dashboard.url}?namespace={namespace}")
    expect(page.locator("body")).to_have_attribute("data-live", "yes")
    expect(page.locator("#empty")).to_be_visible()
    gate, trainer = uuid.uuid4().hex[:8], TrainerProgress()
    row = page.locator(f'tr[data-key="DistTrainJob/{namespace}/vision"]')
    try:
        reporting = f"spec:\n  progressPort: {trainer.port}\n"
        cluster.apply(namespace, _gated("vision", gate).replace("spec:\n", reporting, 1))
        expect(row.locator('[data-field="phase"]')).to_have_text("Pending", timeout=WAIT_MS)
        with _gate_opened(cluster, gate):
            running_pods(cluster, namespace, "vision", 4)
            expect(row.locator('[data-field="phase"]')).to_have_text("Running", timeout=WAIT_MS)
            _report_progress(cluster, namespace, trainer)
            expect(row.locator('[data-field="progress"]')).to_have_text("step 30/40 loss 1.1", timeout=WAIT_MS)
            final = {"step": 40, "totalSteps": 40, "loss": 0.8, "examplesPerSecond": 150.0}
            cluster.set_pod_status(namespace, "vision-worker-0", "Succeeded", exit_code=0, message=json.dumps(final))
            job_where(cluster, namespace, "vision", "Succeeded", lambda j: holds(j, "Succeeded"))
            expect(row.locator('[data-field="phase"]')).to_have_text("Succeeded", timeout=WAIT_MS)
        _screenshot(page, "dashboard-jobs.png")
    finally:
        trainer.server.shutdown()

    row.locator("a").click()
    expect(page.locator("h1")).to_have_text(f"DistTrainJob {namespace}/vision")
    expect(page.locator("#phase")).to_have_text("Succeeded")
    conditions = page.locator("#conditions tbody")
    expect(conditions).to_contain_text("Succeeded")
    expect(conditions).to_contain_text("Created")
    expect(page.locator("figure.curve")).to_have_count(2)  # loss and examples per second
    expect(page.locator('figure[data-curve="loss"] figcaption')).to_contain_text("steps 10 to 40")
    expect(page.locator("#pods tbody")).to_contain_text("vision-worker-0")
    _screenshot(page, "dashboard-job.png")


def test_a_failed_job_says_why_and_hostile_text_stays_text(
    cluster: Cluster, operator: OperatorProcess, namespace: str, dashboard: Dashboard, viewer: Page
) -> None:
    page = viewer
    cluster.apply(namespace, MWMS.replace("backoffLimit: 3", "backoffLimit: 0"))
    running_pods(cluster, namespace, "mnist-mwms", 4)
    page.goto(f"{dashboard.url}jobs/DistTrainJob/{namespace}/mnist-mwms")
    expect(page.locator("body")).to_have_attribute("data-live", "yes")
    expect(page.locator("#phase")).to_have_text("Running", timeout=WAIT_MS)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"hostile-{uuid.uuid4().hex[:6]}", "namespace": namespace},
        "involvedObject": {"kind": "DistTrainJob", "name": "mnist-mwms", "namespace": namespace},
        "reason": "Hostile",
        "message": HOSTILE,
        "type": "Warning",
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(event))
    cluster.set_pod_status(namespace, "mnist-mwms-worker-1", "Failed", exit_code=1)  # not retryable
    expect(page.locator("#phase")).to_have_text("Failed", timeout=WAIT_MS)  # the page followed the watch
    failed = page.locator('#conditions tr[data-type="Failed"]')
    expect(failed).to_contain_text("mnist-mwms-worker-1")
    expect(failed).to_contain_text("exit code 1")
    expect(page.locator("#events tbody")).to_contain_text(HOSTILE)  # as the characters themselves
    assert page.evaluate("window.hacked") is None
    _screenshot(page, "dashboard-failed.png")


def test_a_replicas_log_is_shown_as_text(
    process_cluster: Cluster, operator: OperatorProcess, process_namespace: str, dashboard: Dashboard, page: Page
) -> None:
    """On the process node, whose pods write real logs: the log page reads it (from the pod, or as kept)."""
    process_cluster.apply(
        process_namespace, json.dumps(JobBuilder("echo").script(f"echo '{HOSTILE}'; echo done").obj())
    )
    job_where(process_cluster, process_namespace, "echo", "Succeeded", lambda j: holds(j, "Succeeded"))
    sign_in(page, dashboard, viewer_token(process_cluster, process_namespace, "viewer", process_namespace))
    page.goto(f"{dashboard.url}jobs/DistTrainJob/{process_namespace}/echo/logs/worker-0")
    expect(page.locator("h1")).to_contain_text("Log of worker-0")
    expect(page.locator("#log")).to_have_text(f"{HOSTILE}\ndone")
    expect(page.locator(".attempts a")).to_have_count(1)
    assert page.evaluate("window.hacked") is None


def test_nothing_can_be_written_through_the_dashboard(dashboard: Dashboard) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        request = urllib.request.Request(f"{dashboard.url}jobs/DistTrainJob/default/x", method=method, data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 405, method
    with urllib.request.urlopen(f"{dashboard.url}healthz", timeout=10) as answer:
        assert "default-src 'self'" in answer.headers["Content-Security-Policy"]
    roles = yaml_rules(DASHBOARD_RBAC)
    assert roles["disttrain-dashboard"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]},
    ]  # the dashboard's own account reads no job, pod or log: each viewer reads as themselves
    assert {verb for rule in roles["disttrain-viewer"] for verb in rule["verbs"]} == {"get", "list", "watch"}


def yaml_rules(path: Path) -> dict[str, list[dict[str, list[str]]]]:
    import yaml  # noqa: PLC0415

    documents = [document for document in yaml.safe_load_all(path.read_text()) if document]
    return {doc["metadata"]["name"]: doc["rules"] for doc in documents if doc["kind"] == "ClusterRole"}


def test_a_viewer_without_rights_reads_why(
    cluster: Cluster, operator: OperatorProcess, namespace: str, dashboard: Dashboard, page: Page
) -> None:
    sign_in(page, dashboard, viewer_token(cluster, namespace, "nobody"))
    problem = page.locator(".problem")
    expect(problem).to_contain_text("You may not list jobs in any namespace", timeout=WAIT_MS)
    page.goto(f"{dashboard.url}?namespace={namespace}")  # typed in: the API server's own answer
    problem = page.locator(".problem", has_text=f"DistTrainJobs in namespace {namespace} cannot be shown")
    expect(problem).to_contain_text("forbidden", timeout=WAIT_MS)
    response = page.goto(f"{dashboard.url}jobs/DistTrainJob/{namespace}/anything")
    assert response is not None and response.status == 403
    expect(page.locator("h1")).to_have_text(f"Cannot show DistTrainJob {namespace}/anything")
    expect(page.locator("body")).to_contain_text("ask for a Role with get, list and watch")
    _screenshot(page, "dashboard-forbidden.png")


def _status(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=20) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_viewer_of_one_namespace_sees_nothing_of_another(
    cluster: Cluster, operator: OperatorProcess, namespace: str, dashboard: Dashboard, page: Page
) -> None:
    other = f"other-{uuid.uuid4().hex[:6]}"
    cluster.create_namespace(other)
    try:
        cluster.apply(namespace, MWMS.replace("name: mnist-mwms", "name: mine", 1))
        cluster.apply(other, MWMS.replace("name: mnist-mwms", "name: theirs", 1))
        job_where(cluster, other, "theirs", "its status", lambda j: bool(j.get("status")))
        token = viewer_token(cluster, namespace, "viewer", namespace)
        for address in ("", f"jobs/DistTrainJob/{namespace}/mine"):  # no token: the sign-in page, which says how
            code, text = _status(f"{dashboard.url}{address}")
            assert (code, "kubectl create token" in text) == (401, True), address
        assert _status(dashboard.url, {"Authorization": "Bearer not-a-token"})[0] == 401
        rebound = {"Authorization": f"Bearer {token}", "Host": "attacker.example:8080"}
        assert _status(f"{dashboard.url}?namespace={namespace}", rebound)[0] == 400  # DNS rebinding
        bearer = {"Authorization": f"Bearer {token}"}
        assert _status(f"{dashboard.url}jobs/DistTrainJob/{other}/theirs", bearer)[0] == 403
        assert _status(f"{dashboard.url}jobs/DistTrainJob/{other}/theirs/logs/worker-0", bearer)[0] == 403
        sign_in(page, dashboard, token)
        page.goto(dashboard.url)  # the viewer may list one namespace's jobs: the front page is that namespace's
        expect(page).to_have_url(f"{dashboard.url}?namespace={namespace}", timeout=WAIT_MS)
        page.goto(f"{dashboard.url}?namespace={namespace}")
        expect(page.locator(f'tr[data-key="DistTrainJob/{namespace}/mine"]')).to_be_visible(timeout=WAIT_MS)
        expect(page.locator(f'tr[data-key="DistTrainJob/{other}/theirs"]')).to_have_count(0)
        expect(page.locator("body")).not_to_contain_text("theirs")
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false")


def test_a_dashboard_of_one_namespace_serves_no_page_of_another(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    """`-n` holds for every page, whatever the dashboard's own account may read."""
    admin = Dashboard(cluster.kubeconfig, "-n", namespace)
    try:
        assert _status(f"{admin.url}jobs/DistTrainJob/kube-system/anything")[0] == 404
        assert _status(f"{admin.url}jobs/DistTrainJob/kube-system/anything/logs/worker-0?attempt=%C2%B2")[0] == 404
        assert _status(f"{admin.url}jobs/DistTrainJob/{namespace}/anything/logs/worker-0?attempt=%C2%B2")[0] == 404
    finally:
        admin.stop()
