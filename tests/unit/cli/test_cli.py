"""`disttrain render` and `disttrain crd` as users run them: exit codes and messages, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from disttrain_cli import main as cli_main
from disttrain_cli.completion import kubectl_completions
from disttrain_cli.dashboard_command import is_loopback
from disttrain_cli.main import main
from disttrain_cli.operator_command import build_parser as operator_parser
from disttrain_cli.operator_command import read_settings
from disttrain_core.api import crd, yaml_io
from support.repository import EXAMPLES, INVALID_CORPUS, ROOT, expected_message


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "disttrain_cli.main", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False, cwd=ROOT)


def test_render_prints_a_stream_of_objects(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml")]) == 0
    documents = yaml_io.load_all(capsys.readouterr().out)
    kinds = [document["kind"] for document in documents]
    assert kinds == ["Service", "NetworkPolicy", "PersistentVolumeClaim"] + ["Pod"] * 4
    assert all(document["metadata"]["namespace"] == "default" for document in documents)


def test_render_shows_the_gang_an_operator_that_makes_every_job_one_would_add(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = str(ROOT / "examples" / "multi-worker-mirrored-gpu.yaml")
    assert main(["render", example, "--gang-scheduler", "volcano"]) == 0
    assert "PodGroup" not in {document["kind"] for document in yaml_io.load_all(capsys.readouterr().out)}
    assert main(["render", example, "--gang-scheduler", "volcano", "--gang-by-default"]) == 0
    assert "PodGroup" in {document["kind"] for document in yaml_io.load_all(capsys.readouterr().out)}


def test_render_refuses_a_topology_key_as_an_operator_of_another_gang_scheduler_would() -> None:
    """The operator fails such a job before any pod (the planner's `unmet_need`); render says the same."""
    job = (ROOT / "examples" / "multi-worker-mirrored-gpu.yaml").read_text()
    job = job.replace(
        "  runPolicy:\n", "  runPolicy:\n    schedulingPolicy: {topologyKey: topology.kubernetes.io/zone}\n"
    )
    assert "topologyKey" in job
    refused = _run("render", "-", "--gang-scheduler", "volcano", "--gang-by-default", stdin=job)
    assert refused.returncode != 0
    assert "(mnist-mwms) would fail: schedulingPolicy.topologyKey needs" in refused.stderr, refused.stderr
    assert _run("render", "-", "--gang-scheduler", "kubernetes", "--gang-by-default", stdin=job).returncode == 0


def test_render_reads_stdin_and_takes_a_namespace() -> None:
    result = _run("render", "-", "--namespace", "research", stdin=EXAMPLES[0].read_text())
    assert result.returncode == 0, result.stderr
    assert {document["metadata"]["namespace"] for document in yaml_io.load_all(result.stdout)} == {"research"}


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("a: [b\n", "broken YAML"),
        ("", "no DistTrainJob in the input"),
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", 'kind: must be "DistTrainJob"'),
        ("- 1\n- 2\n", "a manifest must be a mapping"),
        ("\x00\x01", "broken YAML"),
        *(
            (f"apiVersion: disttrain.io/v1alpha1\nkind: DistTrainJob\nmetadata: {value}\nspec: {{}}\n", message)
            for value, message in [
                ("5", "metadata: Invalid type: must be an object, not integer"),
                ("[a]", "metadata: Invalid type: must be an object, not array"),
                ("text", "metadata: Invalid type: must be an object, not string"),
                ("null", "metadata.name: Required value"),
            ]
        ),
    ],
)
def test_bad_input_fails_cleanly(stdin: str, message: str) -> None:
    result = _run("render", "-", stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_missing_file() -> None:
    result = _run("render", "no-such-file.yaml")
    assert result.returncode == 1
    assert "no such file" in result.stderr


def test_invalid_corpus_names_the_field_and_rule() -> None:
    path = INVALID_CORPUS[0].with_name("ps-without-ps.yaml")
    result = _run("render", str(path))
    assert result.returncode == 1
    assert f"spec: {expected_message(path)}" in result.stderr
    assert "(ps-no-ps)" in result.stderr


def test_crd_check_and_generate(tmp_path: Path) -> None:
    assert _run("crd", "check").returncode == 0
    stale = tmp_path / crd.CRD_FILE
    stale.write_text("stale\n")
    result = _run("crd", "check", "--dir", str(tmp_path))
    assert result.returncode == 1
    assert "differs from the models" in result.stderr
    assert _run("crd", "generate", "--dir", str(tmp_path)).returncode == 0
    assert stale.read_text() == (ROOT / "crds" / crd.CRD_FILE).read_text()


def test_the_operators_namespaces_reach_its_settings_in_every_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    args = operator_parser().parse_args(["--namespace=a", "--namespace", "b", "-n", "c", "-nd", "--verbose"])
    assert read_settings(args).watch_namespaces == ("a", "b", "c", "d")
    assert read_settings(operator_parser().parse_args(["--all-namespaces"])).watch_namespaces == ()
    with pytest.raises(SystemExit):
        operator_parser().parse_args(["-n", "a", "--all-namespaces"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_dev_cluster_is_a_command_only_where_the_development_package_is_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--help"]) == 0
    assert "dev-cluster" in capsys.readouterr().out  # disttrain-dev is installed for the tests
    monkeypatch.setattr(cli_main, "entry_points", lambda group: [])  # as in the operator image
    assert main(["--help"]) == 0
    assert "dev-cluster" not in capsys.readouterr().out
    assert main(["dev-cluster", "up"]) == 2
    assert "No such command 'dev-cluster'" in capsys.readouterr().err


def test_every_command_states_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "--help"]) == 0
    listed = capsys.readouterr().out.split("Commands:")[1].split()
    assert {"get", "list", "describe", "logs", "tensorboard"} <= set(listed)
    assert main(["jobs", "get", "-o", "table"]) == 2
    assert "'table' is not one of 'wide', 'yaml', 'json', 'name'" in capsys.readouterr().err


def test_shell_completion_scripts_and_kubectls_plugin_completion(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in ("bash", "zsh", "fish"):
        assert main(["completion", shell]) == 0
        assert "_DISTTRAIN_COMPLETE" in capsys.readouterr().out
    assert kubectl_completions(["de"]) == ["describe"]
    assert kubectl_completions(["get", "--o"]) == ["--output"]
    assert kubectl_completions(["get", "-o", ""]) == ["wide", "yaml", "json", "name"]
    result = subprocess.run(["kubectl_complete-disttrain", "lo"], capture_output=True, text=True, check=True)
    assert result.stdout == "logs\n:4\n"  # one completion a line, then cobra's no-file directive


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.7", "::", "dashboard.example"])
def test_the_dashboard_serves_another_machine_only_to_viewers_who_sign_in(
    host: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --authenticate every visitor would read with the kubeconfig's rights: only loopback is served."""
    assert main(["dashboard", "--host", host, "--port", "0"]) == 2
    assert "add --authenticate" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"])
def test_loopback_is_served_as_it_is(host: str) -> None:
    assert is_loopback(host)
