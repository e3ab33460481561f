"""The command line: what it prints and how flags become configuration."""

import argparse
import logging
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import structlog
import yaml

from llmkube import __version__
from llmkube.api.crds import all_crds
from llmkube.cli import build_parser, main
from llmkube.controllers.setup import ControllersConfig
from llmkube.plan.inferenceservice.config import MODEL_STORAGE_KINDS
from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts
from llmkube.process.config import controllers_config, manager_config


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """`main(["controller", ...])` configures logging onto pytest's captured stderr, which is closed
    after the test: any later log line of the session (the e2e operator's shutdown) would fail."""
    handlers = logging.root.handlers[:]
    yield
    structlog.reset_defaults()
    logging.root.handlers[:] = handlers


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"llmkube {__version__}"


def test_crds_prints_the_generated_crds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == all_crds()


def test_controller_flags_become_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMKUBE_INTEL_GPU_RESOURCE", "gpu.intel.com/xe")
    args = build_parser().parse_args(
        [
            "controller",
            "--workers=6",
            "--model-cache-path=/cache",
            "--model-cache-size=50Gi",
            "--model-cache-access-mode=ReadWriteMany",
            "--default-fsgroup=0",
            "--model-revalidate-interval=600",
            "--init-container-image=registry.local/curl:1",
        ]
    )
    config = controllers_config(args)
    assert (config.isvc_workers, config.model_workers) == (6, 3)
    assert config.operator.model_cache_path == "/cache" and config.model.cache_path == "/cache"
    assert config.operator.model_cache_size == "50Gi"
    assert config.operator.model_cache_access_mode == "ReadWriteMany"
    assert config.operator.default_fsgroup == 0
    assert config.operator.init_container_image == "registry.local/curl:1"
    assert config.operator.intel_gpu_resource == config.model.intel_gpu_resource == "gpu.intel.com/xe"
    assert config.model.revalidate_interval == timedelta(minutes=10)


def test_controller_defaults_match_the_reference_flags() -> None:
    config = controllers_config(build_parser().parse_args(["controller"]))
    assert config.operator.model_cache_path == "/models"
    assert config.operator.model_cache_size == "100Gi"
    assert config.operator.init_container_image == "docker.io/curlimages/curl:8.18.0"
    assert config.operator.default_fsgroup == 102
    assert config.model.revalidate_interval == timedelta(hours=1)


@pytest.mark.parametrize(
    ("flags", "workers"),
    [([], (16, 4)), (["--workers=6"], (6, 3)), (["--workers=1"], (1, 1)), (["--workers=64"], (64, 4))],
)
def test_models_get_half_the_workers_at_most_four(flags: list[str], workers: tuple[int, int]) -> None:
    config = controllers_config(build_parser().parse_args(["controller", *flags]))
    assert (config.isvc_workers, config.model_workers) == workers


def test_embedded_controllers_get_the_command_lines_default_workers() -> None:
    config = controllers_config(build_parser().parse_args(["controller"]))
    assert (ControllersConfig().isvc_workers, ControllersConfig().model_workers) == (
        config.isvc_workers,
        config.model_workers,
    )


def test_leader_election_and_copy_flags() -> None:
    args = build_parser().parse_args(
        [
            "controller",
            "--leader-elect",
            "--leader-elect-lease-duration=30",
            "--leader-elect-renew-deadline=20",
            "--leader-elect-retry-period=4",
            "--model-copy-bytes-per-second=1048576",
        ]
    )
    timing = manager_config(args).leader_timing
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (30, 20, 4)
    assert controllers_config(args).model_copy_bytes_per_second == 1048576
    defaults = build_parser().parse_args(["controller"])
    timing = manager_config(defaults).leader_timing
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (15, 10, 2)
    assert controllers_config(defaults).model_copy_bytes_per_second is None


def test_leader_election_timings_client_go_would_refuse_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["controller", "--leader-elect-lease-duration=10", "--leader-elect-renew-deadline=10"]) == 2
    assert "greater than the renew deadline" in capsys.readouterr().err


def test_local_model_roots(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMKUBE_MODEL_LOCAL_ROOTS", raising=False)
    default = controllers_config(build_parser().parse_args(["controller"]))
    assert default.model.local_source_roots == ()  # in a cluster: local sources refused
    given = build_parser().parse_args(["controller", "--model-local-roots=/data/models/,/mnt/weights"])
    assert controllers_config(given).model.local_source_roots == ("/data/models", "/mnt/weights")
    monkeypatch.setenv("LLMKUBE_MODEL_LOCAL_ROOTS", "/srv/models")
    from_env = build_parser().parse_args(["controller"])
    assert controllers_config(from_env).model.local_source_roots == ("/srv/models",)
    assert main(["controller", "--model-local-roots=models"]) == 2
    assert "--model-local-roots: 'models' is not an absolute path" in capsys.readouterr().err


def test_model_source_egress_flags(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS", "LLMKUBE_SERVICE_CIDR", "LLMKUBE_POD_CIDR"):
        monkeypatch.delenv(name, raising=False)
    default = controllers_config(build_parser().parse_args(["controller"])).model_egress
    assert default == EgressConfig()  # nothing allowed beyond the default; the networks discovered
    given = build_parser().parse_args(
        [
            "controller",
            "--model-source-allowed-hosts=mirror.models.svc,*.internal,10.1.2.3:8080",
            "--service-cidr=10.96.0.0/12",
            "--pod-cidr=10.244.0.0/16,fd10::/64",
        ]
    )
    egress = controllers_config(given).model_egress
    assert egress.allowed_hosts == parse_allowed_hosts("mirror.models.svc,*.internal,10.1.2.3:8080")
    assert [str(c) for c in egress.service_cidrs] == ["10.96.0.0/12"]
    assert [str(c) for c in egress.pod_cidrs] == ["10.244.0.0/16", "fd10::/64"]
    monkeypatch.setenv("LLMKUBE_MODEL_SOURCE_ALLOWED_HOSTS", "127.0.0.1")
    from_env = controllers_config(build_parser().parse_args(["controller"])).model_egress
    assert from_env.allowed_hosts == parse_allowed_hosts("127.0.0.1")
    assert main(["controller", "--model-source-allowed-hosts=2130706433"]) == 2
    assert (
        "--model-source-allowed-hosts: '2130706433' is not an IP address or CIDR" in capsys.readouterr().err
    )
    assert main(["controller", "--service-cidr=10.96.0.0/40"]) == 2
    assert "--service-cidr: '10.96.0.0/40' is not a CIDR" in capsys.readouterr().err


def test_router_allowance_flags(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LLMKUBE_ROUTER_EXTERNAL_HOSTS", "LLMKUBE_ROUTER_ALLOWED_IMAGES", "LLMKUBE_ROUTER_IMAGE"):
        monkeypatch.delenv(name, raising=False)
    default = controllers_config(build_parser().parse_args(["controller"])).router
    assert (default.allowed_images, default.external_hosts) == ((), ())  # the providers' hosts only
    assert default.image == f"ghcr.io/llmkube/llmkube:{__version__}"
    given = build_parser().parse_args(
        [
            "controller",
            "--router-image=registry.example/llmkube:1",
            "--router-allowed-images=registry.example/llmkube, registry.example/pinned:2",
            "--router-external-hosts=litellm.gateway.svc:4000,*.internal.example",
        ]
    )
    router = controllers_config(given).router
    assert router.image == "registry.example/llmkube:1"
    assert router.allowed_images == ("registry.example/llmkube", "registry.example/pinned:2")
    assert router.external_hosts == parse_allowed_hosts("litellm.gateway.svc:4000,*.internal.example")
    # The router's tenancy is the services' (--allowed-service-types and the rest).
    assert router.tenancy == controllers_config(given).operator.tenancy
    monkeypatch.setenv("LLMKUBE_ROUTER_EXTERNAL_HOSTS", "10.96.0.0/12")
    from_env = controllers_config(build_parser().parse_args(["controller"])).router
    assert from_env.external_hosts == parse_allowed_hosts("10.96.0.0/12")
    monkeypatch.delenv("LLMKUBE_ROUTER_EXTERNAL_HOSTS")
    assert main(["controller", "--router-external-hosts=gw.example:http"]) == 2
    assert "--router-external-hosts: 'gw.example:http': 'http' is not a port" in capsys.readouterr().err
    assert main(["controller", "--router-allowed-images=--privileged"]) == 2
    assert "--router-allowed-images: --privileged: not an image reference" in capsys.readouterr().err
    # The router's own copy of the list, as the controller hands it over.
    assert main(["router", "--model-router=r", "--namespace=n", "--external-hosts=2130706433"]) == 2
    assert "llmkube router: --external-hosts: '2130706433' is not an IP address or CIDR" in (
        capsys.readouterr().err
    )


def test_model_storage_flags(capsys: pytest.CaptureFixture[str]) -> None:
    default = controllers_config(build_parser().parse_args(["controller"])).operator
    assert (default.model_storage, default.ephemeral_cache_size_limit) == ("namespace", "20Gi")
    args = ["controller", "--model-storage=ephemeral", "--ephemeral-cache-size-limit=1024Mi"]
    given = controllers_config(build_parser().parse_args(args)).operator
    assert (given.model_storage, given.ephemeral_cache_size_limit) == ("ephemeral", "1Gi")
    # The flag offers exactly the planner's modes.
    for kind in MODEL_STORAGE_KINDS:
        assert build_parser().parse_args(["controller", f"--model-storage={kind}"]).model_storage == kind
    for limit, says in [("lots", "is not a quantity"), ("0", "must be more than zero"), ("-1Gi", "must be")]:
        assert main(["controller", f"--ephemeral-cache-size-limit={limit}"]) == 2
        assert f"--ephemeral-cache-size-limit: '{limit}' {says}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["controller", "--model-storage=per-node"])
    assert exit_info.value.code == 2
    choices = ", ".join(f"'{kind}'" for kind in MODEL_STORAGE_KINDS)
    assert f"invalid choice: 'per-node' (choose from {choices})" in capsys.readouterr().err


def test_service_cache_flags(capsys: pytest.CaptureFixture[str]) -> None:
    default = controllers_config(build_parser().parse_args(["controller"])).operator
    assert (default.service_cache_size, default.max_service_cache_size) == ("", "100Gi")
    args = [
        "controller",
        "--model-storage=per-service",
        "--service-cache-size=2048Mi",
        "--max-service-cache-size=10Gi",
    ]
    given = controllers_config(build_parser().parse_args(args)).operator
    assert (given.model_storage, given.service_cache_size, given.max_service_cache_size) == (
        "per-service",
        "2Gi",
        "10Gi",
    )
    for flags, says in [
        (["--max-service-cache-size=0"], "--max-service-cache-size: '0' must be more than zero"),
        (["--service-cache-size=lots"], "--service-cache-size: 'lots' is not a quantity"),
        (
            ["--service-cache-size=20Gi", "--max-service-cache-size=10Gi"],
            "--service-cache-size: 20Gi is more than --max-service-cache-size (10Gi)",
        ),
    ]:
        assert main(["controller", *flags]) == 2
        assert says in capsys.readouterr().err


def test_run_reads_local_models_from_home_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from llmkube.devcli.run import _local_roots_for_run

    monkeypatch.delenv("LLMKUBE_MODEL_LOCAL_ROOTS", raising=False)
    args = build_parser().parse_args(["run"])
    _local_roots_for_run(args)
    assert controllers_config(args).model.local_source_roots == (str(Path.home()),)
    explicit = build_parser().parse_args(["run", "--model-local-roots="])
    _local_roots_for_run(explicit)
    assert controllers_config(explicit).model.local_source_roots == ()


def test_run_with_an_agent_needs_the_real_node_and_says_why(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the kwok tier there is no kube-proxy to route the metal sample's ClusterIP to an agent:
    `--with-agent` stops before any cluster starts, and says why."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert build_parser().parse_args(["run"]).with_agent is False
    assert main(["run", "--tier", "full", "--with-agent"]) == 2
    err = capsys.readouterr().err
    assert "llmkube run: --with-agent needs the real node" in err and "the kwok tier has neither" in err


@pytest.mark.parametrize(("command", "missing"), [("cluster", "gguf"), ("run", "cryptography")])
def test_local_cluster_commands_name_the_extra_they_need(
    command: str, missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout without the `testing` extra: `llmkube cluster`/`run` say what to install."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setitem(sys.modules, missing, None)  # what the import system does for an absent package
    with pytest.raises(SystemExit) as stopped:
        main([command])
    assert str(stopped.value) == (
        f"llmkube {command}: a local cluster needs the 'testing' extra ({missing} is not installed): "
        "pip install -e '.[testing]' in the checkout"
    )


@pytest.mark.parametrize("command", ["cluster", "run"])
def test_local_cluster_commands_outside_a_checkout_say_where_they_run(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed wheel has no test tooling (tests/support/llmkube_testing): the commands say so."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setitem(sys.modules, "llmkube_testing", None)
    with pytest.raises(SystemExit) as stopped:
        main([command])
    assert str(stopped.value).startswith(
        f"llmkube {command} is a developer command: it runs from a checkout of llmkube"
    )


def test_an_unusable_kubeconfig_stops_the_controller_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: gone\n")
    assert main(["controller", f"--kubeconfig={kubeconfig}", "--metrics-bind-address=0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "llmkube controller: cannot connect to the cluster: context 'gone' is not in the kubeconfig"
    )


def _flags(parser: argparse.ArgumentParser, path: str = "llmkube") -> list[tuple[str, str, str | None]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _flags(sub, f"{path} {name}")
        elif action.option_strings and not isinstance(
            action, (argparse._HelpAction, argparse._VersionAction)
        ):
            found.append((path, action.option_strings[-1], action.help))
        elif not action.option_strings and action.dest != "help":
            found.append((path, action.dest, action.help))
    return found


def test_every_flag_and_argument_of_every_command_has_help_text() -> None:
    flags = _flags(build_parser())
    assert len(flags) > 80  # controller, cluster and user commands alike
    assert [(command, flag) for command, flag, text in flags if not text] == []


def test_waiting_for_ctrl_c_stops_on_sigint_even_when_started_with_it_ignored() -> None:
    """`llmkube cluster` waits for Ctrl-C; a shell starts background jobs with SIGINT ignored, and
    the wait must still end on SIGINT (it did not: the wheel test's `llmkube cluster` hung)."""
    code = (
        "import llmkube.devcli.cluster as c; print('waiting', flush=True); c._wait_for_interrupt(); "
        "print('stopped')"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    output = None
    try:
        assert process.stdout is not None and process.stdout.readline() == "waiting\n"
        # Again until the wait ends (the first may come before it has set its handlers), and not
        # once it has: a SIGINT after the wait, while a loaded machine's interpreter is still
        # exiting, would kill it with the default handler back in place.
        for _ in range(50):
            process.send_signal(signal.SIGINT)
            ready, _, _ = select.select([process.stdout], [], [], 0.2)
            if ready:
                output = process.stdout.readline()
                break
        exit_code = process.wait(timeout=30)
    finally:
        process.kill()
    assert output == "stopped\n"
    assert exit_code == 0


def _fresh_interpreter(code: str) -> tuple[str, str]:
    """stdout and stderr of `code` run by a new Python process (what it imports starts empty)."""
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout, completed.stderr


def test_the_parser_loads_neither_the_client_nor_structlog() -> None:
    """Every `llmkube` start builds the parser first; what it imports, every command pays for."""
    loaded, _ = _fresh_interpreter(
        "import sys\n"
        "from llmkube.cli import build_parser\n"
        "build_parser().parse_args(['version'])\n"
        "print(sorted(m for m in ('aiohttp', 'structlog', 'pydantic', 'rich') if m in sys.modules))\n"
    )
    assert loaded.strip() == "[]"


def test_an_in_cluster_controller_loads_no_yaml_parser(tmp_path: Path) -> None:
    """Only a kubeconfig file is YAML; the in-cluster configuration is files and variables."""
    (tmp_path / "token").write_text("t")
    (tmp_path / "namespace").write_text("llmkube-system")
    loaded, _ = _fresh_interpreter(
        "import os, sys\n"
        "from pathlib import Path\n"
        "from llmkube.cli import load_controller_modules\n"
        "load_controller_modules('json')\n"
        "from llmkube.kube.rest.config import in_cluster, in_cluster_config\n"
        "os.environ['KUBERNETES_SERVICE_HOST'] = '10.0.0.1'\n"
        f"account = Path({str(tmp_path)!r})\n"
        "assert in_cluster(account)\n"
        "print(in_cluster_config(account).namespace, 'yaml' in sys.modules)\n"
    )
    assert loaded.split() == ["llmkube-system", "False"]


@pytest.mark.parametrize(("log_format", "rich_loaded"), [("json", False), ("console", True)])
def test_a_controller_with_json_logs_loads_no_rich_and_still_logs_tracebacks(
    log_format: str, rich_loaded: bool
) -> None:
    """structlog imports rich for its console tracebacks; JSON lines do without it."""
    loaded, logged = _fresh_interpreter(
        "import sys\n"
        "from llmkube.cli import load_controller_modules\n"
        f"load_controller_modules({log_format!r})\n"
        "from llmkube.manager.logs import configure_logging\n"
        "import structlog\n"
        f"configure_logging('info', {log_format!r}, sys.stderr)\n"
        "try:\n"
        "    1 / 0\n"
        "except ZeroDivisionError:\n"
        "    structlog.get_logger().exception('reconcile failed')\n"
        "print(sys.modules.get('rich') is not None)\n"
    )
    assert loaded.strip() == str(rich_loaded)
    assert "reconcile failed" in logged and "ZeroDivisionError" in logged


def test_main_pauses_the_gc_only_while_it_loads() -> None:
    import gc

    assert gc.isenabled()
    assert main(["version"]) == 0
    assert gc.isenabled()
    gc.disable()
    try:
        assert main(["version"]) == 0
        assert not gc.isenabled()  # a caller's choice stands
    finally:
        gc.enable()


def test_metal_heartbeat_timeout(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMKUBE_METAL_HEARTBEAT_TIMEOUT", raising=False)
    default = controllers_config(build_parser().parse_args(["controller"]))
    assert default.operator.metal_heartbeat_timeout_seconds == 180.0  # the reference's 3 minutes
    given = build_parser().parse_args(["controller", "--metal-heartbeat-timeout=20"])
    assert controllers_config(given).operator.metal_heartbeat_timeout_seconds == 20.0
    monkeypatch.setenv("LLMKUBE_METAL_HEARTBEAT_TIMEOUT", "45")
    assert (
        controllers_config(build_parser().parse_args(["controller"])).operator.metal_heartbeat_timeout_seconds
        == 45
    )
    assert main(["controller", "--metal-heartbeat-timeout=0"]) == 2
    assert "--metal-heartbeat-timeout: 0.0 is not a positive number of seconds" in capsys.readouterr().err


def test_runtime_images(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMKUBE_RUNTIME_IMAGES", raising=False)
    default = controllers_config(build_parser().parse_args(["controller"]))
    assert dict(default.operator.runtime_images) == {}
    given = build_parser().parse_args(["controller", "--runtime-images=llamacpp-cuda=m/cuda:1,tgi=m/tgi:2"])
    assert dict(controllers_config(given).operator.runtime_images) == {
        "llamacpp-cuda": "m/cuda:1",
        "tgi": "m/tgi:2",
    }
    monkeypatch.setenv("LLMKUBE_RUNTIME_IMAGES", "llamacpp=m/cpu:3")
    from_env = controllers_config(build_parser().parse_args(["controller"]))
    assert dict(from_env.operator.runtime_images) == {"llamacpp": "m/cpu:3"}
    assert main(["controller", "--runtime-images=cuda=m:1"]) == 2
    assert '--runtime-images: unknown key "cuda"' in capsys.readouterr().err


@pytest.mark.parametrize(
    ("helps", "groups", "expected"),
    [
        (
            [("b", "bee"), ("list (ls)", "lists"), ("a", "ay")],
            [("Users", ["list", "a"]), ("Other", ["zzz"])],
            "Users:\n  list (ls)  lists\n  a          ay\n\nOther:\n  b          bee",
        ),
        # a command no group names still shows, in the last group
        ([("x", "ex")], [("Users", ["a"]), ("Other", [])], "Other:\n  x  ex"),
        # a command named twice shows once, where it is named first
        ([("a", "ay")], [("One", ["a"]), ("Two", ["a"])], "One:\n  a  ay"),
        ([], [("One", ["a"])], ""),
    ],
)
def test_grouped_commands(
    helps: list[tuple[str, str]], groups: list[tuple[str, list[str]]], expected: str
) -> None:
    from llmkube.cli import grouped_commands

    assert grouped_commands(helps, groups) == expected


def test_help_lists_the_users_commands_first_and_every_command_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from llmkube.cli import build_parser

    parser = build_parser()
    text = parser.format_help()
    users = text.index("Commands for users of a cluster:")
    assert (
        users < text.index("Commands that run llmkube") < text.index("Developer commands (from a checkout):")
    )
    listed = [
        line.split()[0] for line in text.splitlines() if line.startswith("  ") and not line.startswith("   ")
    ]
    commands = [name for name in listed if not name.startswith("-") and name != "COMMAND"]
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    primary = {name for name, sub in subparsers.choices.items() if sub.prog.endswith(f" {name}")}
    assert sorted(commands) == sorted(set(commands)) and set(commands) == primary
