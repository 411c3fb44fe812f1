"""``jobgate worker --pull``: what it refuses before it connects (the running worker is tested
end to end in tests/e2e/test_pull_e2e.py)."""

from __future__ import annotations

import pytest

from gateway import cli


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


BASE = ["worker", "--pull", "--queue", "q", "--endpoint", "ep_1"]


def test_no_gateway_url_is_one_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JOBGATE_URL", raising=False)
    code, err = run([*BASE, "tests.e2e.pull_worker_app:worker"], capsys)
    assert code == 1
    assert err == "jobgate: error: no gateway URL: pass --url or set JOBGATE_URL\n"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon", "name the worker as MODULE:ATTRIBUTE, not 'no_colon'"),
        ("tests.nowhere:worker", "cannot import 'tests.nowhere'"),
        (
            "tests.e2e.pull_worker_app:steps",
            "tests.e2e.pull_worker_app:steps is not a jobgate Worker",
        ),
    ],
)
def test_a_bad_worker_target_is_named(
    target: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run([*BASE, "--url", "http://127.0.0.1:9", target], capsys)
    assert code == 1
    assert err.startswith(f"jobgate: error: {message}")


def test_wait_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*BASE, "--url", "http://127.0.0.1:9", "--wait", "61", "m:w"]
    code, err = run(argv, capsys)
    assert code == 2  # wrong arguments (docs/cli.md): usage line, then the reason
    assert err.startswith("usage: jobgate worker ")
    assert "--wait must be between 0 and 60 seconds" in err


def test_pull_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["worker", "--queue", "q", "--endpoint", "e", "m:w"])
    assert "--pull" in capsys.readouterr().err
