"""The operator commands of ``jobgate`` (queues, tasks, dlq, clean) against a mocked gateway
(respx): their arguments, what they send, the tables they print, and how they fail."""

from __future__ import annotations

import argparse
import functools
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
import respx

from gateway import cli
from gateway.commands import common
from gateway.commands.table import Column, clip, moment, percent, render, span
from sdk.client import Client
from tests.support import free_port

URL = "http://gateway.test"
KEY = "jg_operator_key"
ID1 = "01J00000000000000000000001"
ID2 = "01J00000000000000000000002"
T0 = "2030-01-01T00:00:00Z"


def task_json(state: str = "queued", task_id: str = ID1, **fields: Any) -> dict[str, Any]:
    task = {
        "id": task_id,
        "queue": "emails",
        "name": "send",
        "state": state,
        "attempt": 0,
        "max_attempts": 5,
        "created_at": T0,
        "run_at": T0,
    }
    return task | fields


def queue_json(name: str, paused: bool = False, **counts: int) -> dict[str, Any]:
    return {"name": name, "policy": {"paused": paused}, "created_at": T0, "counts": counts}


def endpoint_json(queue: str, enabled: bool = True) -> dict[str, Any]:
    return {
        "id": "ep1",
        "queue": queue,
        "url": "http://worker.test/",
        "concurrency": 4,
        "capabilities": [],
        "enabled": enabled,
        "created_at": T0,
    }


@pytest.fixture
def gw(monkeypatch: pytest.MonkeyPatch) -> Iterator[respx.MockRouter]:
    """A mocked gateway at URL, named by the environment as ``jobgate dev`` prints it."""
    monkeypatch.setenv("JOBGATE_URL", URL)
    monkeypatch.setenv("JOBGATE_API_KEY", KEY)
    # respx intercepts httpx: the commands' Client sends through httpx here
    monkeypatch.setattr(
        common, "Client", functools.partial(Client, transport=httpx.HTTPTransport())
    )
    with respx.mock(base_url=URL, assert_all_called=False) as router:
        yield router


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def params(route: respx.Route) -> dict[str, str]:
    return dict(route.calls.last.request.url.params)


def sent(route: respx.Route) -> Any:
    return json.loads(route.calls.last.request.content)


# --- tables and cells ---------------------------------------------------------------------------


def test_render_aligns_columns_and_numbers() -> None:
    columns = [Column("QUEUE"), Column("QUEUED", numeric=True), Column("NOTE")]
    text = render(columns, [["emails", "12", None], ["a", "3456789", "x"]])
    assert text.splitlines() == [
        "QUEUE    QUEUED  NOTE",
        "emails       12  -",
        "a       3456789  x",
    ]
    assert text.endswith("x\n")


def test_render_refuses_a_short_row() -> None:
    with pytest.raises(ValueError, match="1 cells for 2 columns"):
        render([Column("A"), Column("B")], [["x"]])


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.42, "0.4s"),
        (12.9, "12s"),
        (185, "3m05s"),
        (180, "3m"),
        (3720, "1h02m"),
        (7 * 86_400, "7d"),
        (2 * 86_400 + 3 * 3600 + 59, "2d03h"),
    ],
)
def test_span(seconds: float, shown: str) -> None:
    assert span(seconds) == shown


def test_cells() -> None:
    paris = datetime(2030, 1, 1, 14, 0, 5, 999, tzinfo=timezone(timedelta(hours=1)))
    assert moment(paris) == "2030-01-01T13:00:05Z"
    assert moment(None) is None
    assert percent(0.256) == "26%"
    assert clip("boom\nTraceback ...") == "boom..."
    assert clip("x" * 100, 10) == "xxxxxxx..."
    assert clip("  short ") == "short"
    assert clip("") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("12h", 43_200), ("7d", 604_800), ("1h30m", 5400), ("45", 45)],
)
def test_durations(text: str, seconds: float) -> None:
    assert common.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7x", "h", "", "-5", "1h 30m", "inf", "3d-1h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        common.parse_duration(text)


def test_times() -> None:
    assert common.parse_time("2030-01-01T00:00:00Z") == datetime(2030, 1, 1, tzinfo=UTC)
    day_ago = common.parse_time("24h")
    assert abs(datetime.now(UTC) - timedelta(hours=24) - day_ago) < timedelta(minutes=1)
    with pytest.raises(argparse.ArgumentTypeError, match="no timezone"):
        common.parse_time("2030-01-01T00:00:00")
    with pytest.raises(argparse.ArgumentTypeError, match="not a time"):
        common.parse_time("yesterday")


# --- queues -------------------------------------------------------------------------------------


def test_queues_table(gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]) -> None:
    listed = gw.get("/v1/queues").respond(
        200,
        json={
            "items": [
                queue_json("emails", queued=12, running=3, dead=1),
                queue_json("images", paused=True, scheduled=4),
            ]
        },
    )
    gw.get("/v1/queues/emails/endpoints").respond(
        200, json={"items": [endpoint_json("emails"), endpoint_json("emails", enabled=False)]}
    )
    gw.get("/v1/queues/images/endpoints").respond(200, json={"items": []})
    code, out, err = run(capsys, "queues")
    assert (code, err) == (0, "")
    assert listed.calls.last.request.headers["authorization"] == f"Bearer {KEY}"
    assert out.splitlines() == [
        "QUEUE   PAUSED  QUEUED  SCHEDULED  WAITING  RUNNING  SUCCEEDED  FAILED  DEAD  ENDPOINTS",
        "emails  no          12          0        0        3          0       0     1        1/2",
        "images  yes          0          4        0        0          0       0     0          0",
    ]


def test_queues_json_is_the_api_answer(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    gw.get("/v1/queues").respond(200, json={"items": [queue_json("emails", queued=2)]})
    endpoints = gw.get("/v1/queues/emails/endpoints").respond(200, json={"items": []})
    code, out, _ = run(capsys, "queues", "--json")
    assert code == 0
    (queue,) = json.loads(out)["items"]
    assert (queue["name"], queue["counts"]) == ("emails", {"queued": 2})
    assert not endpoints.called


def test_no_queues_is_said_on_stderr(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    gw.get("/v1/queues").respond(200, json={"items": []})
    code, out, err = run(capsys, "queues")
    assert (code, out) == (0, "")
    assert err.startswith("no queues yet")


# --- tasks --------------------------------------------------------------------------------------


def test_tasks_of_a_state_with_owner_and_next_page(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = task_json(
        "dead", attempt=5, owner="acme", finished_at="2030-01-01T00:05:00Z", error="boom\ntb"
    )
    route = gw.get("/v1/queues/emails/tasks").respond(
        200, json={"items": [dead], "next_cursor": "c2"}
    )
    code, out, err = run(capsys, "tasks", "emails", "--state", "dead", "--owner", "acme")
    assert code == 0
    assert params(route) == {"state": "dead", "owner": "acme"}
    assert out.splitlines() == [
        "ID                          NAME  ATTEMPTS  PRIORITY  OWNER  FINISHED              ERROR",
        f"{ID1}  send       5/5         0  acme   2030-01-01T00:05:00Z  boom...",
    ]
    assert err == "more: jobgate tasks emails --state dead --cursor c2 --owner acme\n"


def test_tasks_default_to_queued_and_show_creation(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    route = gw.get("/v1/queues/emails/tasks").respond(200, json={"items": [task_json()]})
    code, out, _ = run(capsys, "tasks", "emails", "--limit", "7", "--cursor", "c1")
    assert code == 0
    assert params(route) == {"state": "queued", "limit": "7", "cursor": "c1"}
    header, row = out.splitlines()
    assert header.split() == ["ID", "NAME", "ATTEMPTS", "PRIORITY", "OWNER", "CREATED"]
    assert row.split() == [ID1, "send", "0/5", "0", "-", T0]


def test_tasks_running_table(gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]) -> None:
    running = {
        "id": ID1,
        "queue": "emails",
        "name": "send",
        "attempt": 2,
        "endpoint_id": "ep1",
        "endpoint_url": "http://worker.test/",
        "started_at": T0,
        "elapsed": 125.0,
        "last_heartbeat_at": "2030-01-01T00:01:50Z",  # 15 s before start + elapsed
        "progress": 0.5,
        "stalled": True,
    }
    quiet = running | {"id": ID2, "last_heartbeat_at": None, "progress": None, "stalled": False}
    route = gw.get("/v1/running").respond(200, json={"items": [running, quiet], "truncated": True})
    code, out, err = run(capsys, "tasks", "--running", "--queue", "emails", "--limit", "2")
    assert code == 0
    assert params(route) == {"queue": "emails", "limit": "2"}
    header, stalled, silent = (line.split() for line in out.splitlines())
    assert header[-4:] == ["ELAPSED", "HEARTBEAT", "PROGRESS", "STALLED"]
    assert header[:5] == ["ID", "QUEUE", "NAME", "ATTEMPT", "ENDPOINT"]
    assert stalled[:5] == [ID1, "emails", "send", "2", "http://worker.test/"]
    assert stalled[5:] == ["2m05s", "15s", "ago", "50%", "STALLED"]
    assert silent[5:] == ["2m05s", "-", "-", "-"]
    assert "more tasks are running than the 2 shown" in err


def test_tasks_running_takes_the_queue_positionally_too(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    route = gw.get("/v1/running").respond(200, json={"items": []})
    code, out, err = run(capsys, "tasks", "emails", "--running", "--owner", "acme")
    assert (code, out, err) == (0, "", "no tasks running in emails\n")
    assert params(route) == {"queue": "emails", "owner": "acme", "limit": "500"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tasks"], "give a QUEUE, or --running"),
        (["tasks", "--running", "--state", "dead"], "do not apply to --running"),
        (["tasks", "a", "--queue", "b"], "two queues given"),
    ],
)
def test_tasks_argument_mistakes(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    # Wrong arguments: exit 2 with the command's usage line, as docs/cli.md says.
    assert code == 2
    usage, said = err.splitlines()[0], err.splitlines()[-1]
    assert usage.startswith("usage: jobgate tasks ")
    assert said.startswith("jobgate tasks: error: ")
    assert message in said
    assert not gw.calls


@pytest.mark.parametrize(("argv", "most"), [(["emails"], 500), (["--running"], 5000)])
def test_a_limit_past_the_gateways_is_a_usage_error(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], argv: list[str], most: int
) -> None:
    code, _, err = run(capsys, "tasks", *argv, "--limit", "9999")
    assert code == 2
    assert (
        err.splitlines()[-1] == f"jobgate tasks: error: --limit must be from 1 to {most}, not 9999"
    )
    assert not gw.calls


@pytest.mark.parametrize(
    "argv",
    [
        ["tasks", "emails", "--state", "lost"],
        ["tasks", "emails", "--limit", "0"],
        ["clean", "emails", "--state", "queued"],
        ["clean", "emails", "--older-than", "soon"],
        ["dlq", "list", "--since", "2030-01-01"],
        ["dlq", "list", "--limit", "5000"],
        ["dlq"],
    ],
)
def test_bad_arguments_are_usage_errors(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert "usage: jobgate" in capsys.readouterr().err
    assert not gw.calls


# --- dlq ----------------------------------------------------------------------------------------


def test_dlq_list_filters_and_table(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    attempt = {"number": 3, "started_at": T0, "outcome": "error", "error": "timeout"}
    dead = task_json(
        "dead", attempt=3, version="v2", finished_at=T0, attempts=[attempt], max_attempts=3
    )
    route = gw.get("/v1/deadletters").respond(200, json={"items": [dead], "next_cursor": "c9"})
    argv = ["dlq", "list", "--queue", "emails", "--name", "send", "--version", "v2"]
    argv += ["--since", "2030-01-01T01:00:00+01:00", "--until", "2030-02-01T00:00:00Z"]
    code, out, err = run(capsys, *argv, "--limit", "10")
    assert code == 0
    assert params(route) == {
        "queue": "emails",
        "name": "send",
        "version": "v2",
        "since": "2030-01-01T00:00:00Z",
        "until": "2030-02-01T00:00:00Z",
        "limit": "10",
    }
    assert [line.split() for line in out.splitlines()] == [
        ["ID", "QUEUE", "NAME", "VERSION", "OWNER", "ATTEMPTS", "DIED", "ERROR"],
        [ID1, "emails", "send", "v2", "-", "3", T0, "timeout"],
    ]
    assert "--cursor c9" in err


def test_dlq_resubmit_ids_prints_requeued_and_skipped(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    route = gw.post("/v1/deadletters/resubmit").respond(
        200,
        json={"resubmitted": [ID1], "skipped": [{"id": ID2, "reason": "not dead: succeeded"}]},
    )
    code, out, _ = run(capsys, "dlq", "resubmit", ID1, ID2, "--keep-attempts")
    assert code == 0
    assert sent(route) == {"ids": [ID1, ID2], "limit": 1000, "reset_attempts": False}
    assert out.splitlines() == [
        "requeued 1 dead letter",
        "skipped 1:",
        "  ID                          REASON",
        f"  {ID2}  not dead: succeeded",
    ]


def test_dlq_resubmit_by_filter_and_all(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    route = gw.post("/v1/deadletters/resubmit").respond(
        200, json={"resubmitted": [ID1, ID2], "skipped": []}
    )
    code, out, _ = run(capsys, "dlq", "resubmit", "--queue", "emails", "--owner", "acme")
    assert (code, out) == (0, "requeued 2 dead letters\n")
    assert sent(route) == {
        "filter": {"queue": "emails", "owner": "acme"},
        "limit": 1000,
        "reset_attempts": True,
    }
    code, out, _ = run(capsys, "dlq", "resubmit", "--all", "--limit", "5", "--json")
    assert code == 0
    assert sent(route) == {"filter": {}, "limit": 5, "reset_attempts": True}
    assert json.loads(out) == {"resubmitted": [ID1, ID2], "skipped": []}


@pytest.mark.parametrize(
    "argv",
    [
        ["dlq", "resubmit"],
        ["dlq", "resubmit", ID1, "--queue", "emails"],
        ["dlq", "resubmit", "--all", "--name", "send"],
    ],
)
def test_dlq_resubmit_needs_exactly_one_choice(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert "give either task ids, or filter flags" in err
    assert not gw.calls


def test_dlq_resubmit_bad_id_is_named_before_sending(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "dlq", "resubmit", "nope")
    assert code == 1
    assert err.startswith("jobgate: error: invalid input: ids.0: must be a ULID")
    assert not gw.calls


# --- clean --------------------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def emails(gw: respx.MockRouter) -> respx.Route:
    """The queue ``emails`` and its clean route (deleting 3)."""
    gw.get("/v1/queues/emails").respond(200, json=queue_json("emails", dead=2, failed=5))
    return gw.post("/v1/queues/emails/clean").respond(200, json={"deleted": 3})


def test_clean_with_yes(emails: respx.Route, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["clean", "emails", "--state", "dead", "--state", "failed,dead", "--name", "send"]
    code, out, _ = run(capsys, *argv, "--older-than", "7d", "--limit", "50", "--yes")
    assert (code, out) == (0, "deleted 3 tasks from emails\n")
    assert sent(emails) == {
        "states": ["dead", "failed"],
        "name": "send",
        "older_than": 604_800.0,
        "limit": 50,
    }


def test_clean_asks_on_a_terminal(
    emails: respx.Route, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, err = run(capsys, "clean", "emails", "--state", "dead", "--older-than", "12h")
    assert (code, out) == (0, "deleted 3 tasks from emails\n")
    assert err == (
        "Delete up to 10000 dead tasks finished over 12h ago from queue emails? "
        "(it holds 2 dead tasks in all) [y/N] "
    )
    assert sent(emails)["states"] == ["dead"]


def test_clean_not_confirmed_deletes_nothing(
    emails: respx.Route, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("\n"))
    code, out, err = run(capsys, "clean", "emails")
    assert (code, out) == (1, "")
    assert "(it holds 7 succeeded, failed, dead, cancelled tasks in all)" in err
    assert err.endswith("not confirmed: nothing deleted\n")
    assert not emails.called


def test_clean_refuses_without_a_terminal_or_yes(
    emails: respx.Route, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not a confirmation
    code, out, err = run(capsys, "clean", "emails")
    assert (code, out) == (1, "")
    assert err == (
        "jobgate: error: clean deletes tasks and stdin is not a terminal to confirm it: "
        "pass --yes\n"
    )
    assert not emails.called


# --- failures -----------------------------------------------------------------------------------


def test_problem_is_printed_with_its_fields(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = {
        "title": "Validation failed",
        "status": 422,
        "detail": "the query is invalid",
        "errors": [{"field": "limit", "reason": "must be at most 500"}],
    }
    gw.get("/v1/queues/emails/tasks").respond(
        422, json=problem, headers={"content-type": "application/problem+json"}
    )
    code, out, err = run(capsys, "tasks", "emails", "--owner", "o" * 300)
    assert (code, out) == (1, "")
    assert err == (
        "jobgate: error: 422 Validation failed: the query is invalid\n"
        "  limit: must be at most 500\n"
    )


def test_a_detail_that_repeats_the_field_errors_is_not_printed_twice(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = {
        "title": "Validation failed",
        "status": 422,
        "detail": "limit: must be a number from 1 to 500",
        "errors": [{"field": "limit", "reason": "must be a number from 1 to 500"}],
    }
    gw.get("/v1/queues/emails/tasks").respond(422, json=problem)
    code, _, err = run(capsys, "tasks", "emails", "--owner", "o" * 300)
    assert code == 1
    assert err == (
        "jobgate: error: 422 Validation failed\n  limit: must be a number from 1 to 500\n"
    )


def test_missing_key_gets_a_hint(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JOBGATE_API_KEY")
    route = gw.get("/v1/queues").respond(401, json={"title": "Unauthorized", "status": 401})
    code, _, err = run(capsys, "queues")
    assert code == 1
    assert "authorization" not in route.calls.last.request.headers
    assert err.startswith("jobgate: error: 401 Unauthorized\n")
    assert "pass --api-key or set JOBGATE_API_KEY" in err


def test_flags_override_the_environment(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "http://other.test"
    with respx.mock(base_url=other) as elsewhere:
        route = elsewhere.get("/v1/queues").respond(200, json={"items": []})
        code, _, _ = run(capsys, "queues", "--url", other, "--api-key", "k2")
    assert code == 0
    assert route.calls.last.request.headers["authorization"] == "Bearer k2"
    assert not gw.calls


def test_a_reader_that_leaves_early_is_no_traceback(
    gw: respx.MockRouter, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> str:
        raise BrokenPipeError

    gw.get("/v1/queues").respond(200, json={"items": [queue_json("emails")]})
    gw.get("/v1/queues/emails/endpoints").respond(200, json={"items": []})
    monkeypatch.setattr("gateway.commands.queues.render", broken)
    assert run(capsys, "queues") == (1, "", "")


def test_connection_refused_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code, out, err = run(capsys, "queues", "--url", url)
    assert (code, out) == (1, "")
    assert err == f"jobgate: error: cannot reach the gateway at {url}: Connection refused\n"


@pytest.mark.parametrize(
    ("url", "message"),
    [(None, "no gateway URL: pass --url or set JOBGATE_URL"), ("localhost:8787", "http://")],
)
def test_url_mistakes(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    url: str | None,
    message: str,
) -> None:
    monkeypatch.delenv("JOBGATE_URL", raising=False)
    argv = ["dlq", "list"] + (["--url", url] if url else [])
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert err.startswith("jobgate: error: ")
    assert message in err
    assert err.count("\n") == 1
