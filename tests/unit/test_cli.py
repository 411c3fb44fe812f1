"""The ``jobgate`` command line: parsing, ``openapi``, and the user errors of ``dev``/``serve``.

Each user error must end as one ``jobgate: error: ...`` line and exit code 1, no traceback.
"""

from __future__ import annotations

import stat
import sys
import types
from pathlib import Path

import pytest
import yaml

from gateway import cli
from gateway.serving.redis_server import ManagedRedis
from gateway.serving.server import Listening
from gateway.settings import ApiKey, Settings

# --- argument parsing --------------------------------------------------------------------------


def test_serve_flags_are_parsed() -> None:
    args = cli.build_parser().parse_args(
        ["serve", "--host", "0.0.0.0", "--port", "9000", "--redis-url", "redis://r:6380/1"]
    )
    assert (args.host, args.port, args.redis_url) == ("0.0.0.0", 9000, "redis://r:6380/1")
    assert args.log_level is None


def test_dev_defaults() -> None:
    args = cli.build_parser().parse_args(["dev"])
    assert args.data_dir == Path(".jobgate")
    assert args.redis_port is None
    assert args.port is None  # the setting's default (or JOBGATE_PORT) applies


@pytest.mark.parametrize(
    "argv",
    [[], ["nope"], ["serve", "--port", "http"], ["dev", "--log-level", "loud"]],
)
def test_bad_arguments_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert "usage: jobgate" in capsys.readouterr().err


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBGATE_PORT", "9999")
    monkeypatch.setenv("JOBGATE_HOST", "0.0.0.0")
    args = cli.build_parser().parse_args(["serve", "--port", "8000"])
    settings = cli._settings(args)
    assert (settings.host, settings.port) == ("0.0.0.0", 8000)


def test_invalid_setting_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBGATE_PORT", "99999")
    assert cli.main(["serve"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jobgate: error: invalid settings: port:")
    assert err.count("\n") == 1


def test_setting_that_is_not_json_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JOBGATE_API_KEYS", "not json")
    assert cli.main(["serve"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jobgate: error: invalid settings:")
    assert "api_keys" in err
    assert err.count("\n") == 1


def test_an_unknown_scope_is_refused_at_start_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = '[{"key": "0123456789abcdef", "scopes": ["admin"]}, '
    keys += '{"key": "fedcba9876543210", "scopes": ["write"], "name": "ci"}]'
    monkeypatch.setenv("JOBGATE_API_KEYS", keys)
    assert cli.main(["serve"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "jobgate: error: invalid settings: api_keys.1: key 'ci' has unknown scope 'write'; "
        "valid scopes: admin, read, metrics, enqueue:<queue pattern>, work:<queue pattern>, "
        "events:<event name pattern>\n"
    )


# --- openapi -----------------------------------------------------------------------------------

DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "Jobgate", "version": "0.1.0", "description": "Tâches en arrière-plan"},
    "paths": {
        "/v1/queues/{queue}": {"put": {"operationId": "putQueue"}},
        "/v1/queues": {"get": {"operationId": "listQueues"}},
        "/v1/tasks/{task_id}": {"get": {"parameters": [{"name": "wait", "in": "query"}]}},
    },
}


@pytest.fixture
def fake_openapi(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gateway.api.openapi`` replaced by a module whose ``openapi_yaml`` writes DOCUMENT."""
    from gateway.api.openapi import to_yaml

    module = types.ModuleType("gateway.api.openapi")
    module.openapi_yaml = lambda: to_yaml(DOCUMENT)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gateway.api.openapi", module)


@pytest.mark.usefixtures("fake_openapi")
def test_openapi_prints_yaml_in_the_order_built(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["openapi"]) == 0
    out = capsys.readouterr().out
    loaded = yaml.safe_load(out)
    assert loaded == DOCUMENT
    assert list(loaded) == ["openapi", "info", "paths"]  # not sorted
    assert list(loaded["paths"]) == list(DOCUMENT["paths"])
    assert "Tâches en arrière-plan" in out  # written as is, not escaped


@pytest.mark.usefixtures("fake_openapi")
def test_openapi_writes_the_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "openapi.yaml"
    assert cli.main(["openapi", "--output", str(output)]) == 0
    assert capsys.readouterr().out == ""
    assert yaml.safe_load(output.read_text(encoding="utf-8")) == DOCUMENT


@pytest.mark.usefixtures("fake_openapi")
def test_openapi_unwritable_output_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "missing" / "openapi.yaml"
    assert cli.main(["openapi", "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"jobgate: error: cannot write {output}:")


def test_openapi_of_the_real_api_is_valid_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    openapi = pytest.importorskip(
        "gateway.api.openapi", reason="gateway.api.openapi is not written yet"
    )
    assert cli.main(["openapi"]) == 0
    loaded = yaml.safe_load(capsys.readouterr().out)
    assert loaded == openapi.build_openapi()
    assert {"openapi", "paths"} <= set(loaded)


# --- dev ---------------------------------------------------------------------------------------


def test_dev_without_redis_server_is_one_line_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    data_dir = tmp_path / "data"
    assert cli.main(["dev", "--data-dir", str(data_dir), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jobgate: error: redis-server was not found on PATH")
    assert err.count("\n") == 1
    assert not data_dir.exists()  # no key made, no Redis folder


def test_dev_api_key_is_made_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "data" / "dev-api-key"
    key = cli._dev_api_key(path)
    assert len(key) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert cli._dev_api_key(path) == key  # a restart keeps it


def test_dev_api_key_too_short_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "dev-api-key"
    path.write_text("short\n")
    assert len(cli._dev_api_key(path)) >= 32


def test_dev_shows_an_admin_key_from_the_environment() -> None:
    admin = ApiKey(key="a" * 16, scopes=["admin"])
    settings = Settings(api_keys=[ApiKey(key="r" * 16, scopes=["read"]), admin])
    assert cli._shown_key(settings) == admin
    assert cli._shown_key(Settings(api_keys=[])) is None


@pytest.mark.parametrize(
    ("scopes", "label"),
    [
        (["admin"], "(admin)"),
        (["read", "enqueue:mail-*"], "(read, enqueue:mail-*; not admin: "),
    ],
)
def test_dev_banner_labels_the_key_by_its_scopes(
    tmp_path: Path, scopes: list[str], label: str
) -> None:
    redis_server = ManagedRedis(tmp_path, port=6390)
    key = ApiKey(key="k" * 32, scopes=scopes)
    banner = cli._banner(Listening("http://127.0.0.1:8787", None), key, redis_server)
    assert f"API key:   {'k' * 32}  {label}" in banner


def test_dev_turns_the_access_log_on_unless_it_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Settings] = []

    async def serve_async(settings: Settings, **kwargs: object) -> None:
        seen.append(settings)

    monkeypatch.setattr("gateway.serving.server.serve_async", serve_async)
    monkeypatch.setattr(ManagedRedis, "start", lambda self: None)
    argv = ["dev", "--data-dir", str(tmp_path)]
    assert cli.main(argv) == 0
    monkeypatch.setenv("JOBGATE_ACCESS_LOG", "false")
    assert cli.main(argv) == 0
    assert [s.access_log for s in seen] == [True, False]


def test_dev_banner_has_urls_key_and_exports(tmp_path: Path) -> None:
    redis_server = ManagedRedis(tmp_path, port=6390)
    key = ApiKey(key="k" * 32, scopes=["admin"])
    banner = cli._banner(Listening("http://127.0.0.1:8787", None), key, redis_server)
    assert "Gateway:   http://127.0.0.1:8787\n" in banner
    assert "Admin UI:  http://127.0.0.1:8787/admin  (sign in with the API key)\n" in banner
    assert f"export JOBGATE_URL=http://127.0.0.1:8787 JOBGATE_API_KEY={'k' * 32}" in banner
    assert "redis://127.0.0.1:6390/0" in banner
    assert "HTTP/3" not in banner


def test_dev_banner_says_how_to_run_jobgate_when_the_venv_is_not_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `make dev`, `jobgate` is .venv/bin/jobgate, which PATH does not find (issue 31)."""
    venv = tmp_path / ".venv" / "bin"
    monkeypatch.setattr(cli.sys, "executable", str(venv / "python"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    redis_server = ManagedRedis(tmp_path, port=6390)
    key = ApiKey(key="k" * 32, scopes=["admin"])
    banner = cli._banner(Listening("http://127.0.0.1:8787", None), key, redis_server)
    assert "  Commands:  .venv/bin/jobgate --help\n" in banner
