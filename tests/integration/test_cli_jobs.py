"""``jobgate jobs ...`` against a real gateway, its Redis and an SDK worker, all in this process
over loopback (:mod:`tests.sdk.jobs_gateway`); each command runs in a thread, as the user's
terminal would, while the gateway serves in the event loop."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from datetime import UTC

import pytest

from gateway import cli
from sdk import AsyncClient, Crontab, Job, RunStatus
from tests.sdk.jobs_gateway import ADMIN, HELD, READER, Q, jobs_gateway, resize
from tests.support import until


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    async def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(cli.main, list(argv))
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    async def ok(self, *argv: str) -> str:
        code, out, err = await self(*argv)
        assert code == 0, err
        return out


@pytest.fixture
async def admin(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[AsyncClient]:
    """An SDK client of the gateway the commands reach through ``JOBGATE_URL``."""
    async with jobs_gateway(redis_url) as url, AsyncClient(url, ADMIN) as client:
        monkeypatch.setenv("JOBGATE_URL", url)
        monkeypatch.setenv("JOBGATE_API_KEY", ADMIN)
        yield client


@pytest.fixture
def jobgate(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


async def nightly(admin: AsyncClient) -> Job:
    return await admin.create_job(
        title="Thumbnails",
        task=resize,
        kwargs={"size": 256},
        schedule=Crontab(minute="30", hour="2", timezone="Europe/Berlin"),
    )


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("  ") if cell.strip()]


async def test_list_and_show(admin: AsyncClient, jobgate: Cli) -> None:
    job = await nightly(admin)
    manual = await admin.create_job(title="By hand", task={"queue": Q, "name": "other"})
    header, first, second = (await jobgate.ok("jobs", "list")).splitlines()
    assert cells(header) == [
        *["ID", "TITLE", "TASK", "SCHEDULE", "ACTIVE", "NEXT RUN", "LAST RUN", "RUNS"]
    ]
    assert job.next_run is not None
    assert cells(first) == [
        *[job.id, "Thumbnails", f"{Q}/{resize.name}", "cron 30 2 * * * (Europe/Berlin)", "yes"],
        *[job.next_run.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "-", "0"],
    ]
    assert cells(second)[3:] == ["manual", "yes", "-", "-", "0"]
    assert second.startswith(manual.id)

    code, out, err = await jobgate("jobs", "list", "--limit", "1")
    assert (code, len(out.splitlines())) == (0, 2)
    assert err.startswith("more: jobgate jobs list --cursor ")
    listed = json.loads(await jobgate.ok("jobs", "list", "--json"))
    assert [j["id"] for j in listed["items"]] == [job.id, manual.id]

    shown = dict(
        (cells(line)[0], " ".join(cells(line)[1:]))
        for line in (await jobgate.ok("jobs", "show", job.id, "--count", "2")).splitlines()
    )
    assert shown["args"] == '{"args": [], "kwargs": {"size": 256}}'
    assert shown["schedule"] == "cron 30 2 * * * (Europe/Berlin)"
    assert shown["runs"] == "0 (0 firings skipped)"
    assert len(shown["next runs"].split()) == 2
    assert shown["next runs"].split()[0] == job.next_run.astimezone(UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert json.loads(await jobgate.ok("jobs", "show", job.id, "--json"))["id"] == job.id


async def test_pause_resume(admin: AsyncClient, jobgate: Cli) -> None:
    job = await nightly(admin)
    out = await jobgate.ok("jobs", "pause", job.id)
    assert out == f"paused job {job.id} (Thumbnails)\n"
    assert (await admin.get_job(job.id)).active is False
    out = await jobgate.ok("jobs", "resume", job.id.lower())
    assert out.startswith(f"resumed job {job.id} (Thumbnails); next run 20")
    assert (await admin.get_job(job.id)).next_run == job.next_run


async def test_run_then_runs_and_logs(admin: AsyncClient, jobgate: Cli) -> None:
    job = await nightly(admin)
    out = await jobgate.ok(
        "jobs", "run", job.id, "--args", '{"args": [64]}', "--title", "Small", "--note", "n"
    )
    header, line = out.splitlines()
    assert cells(header)[:4] == ["ID", "STATUS", "STARTED BY", "QUEUE"]
    run_id = line.split()[0]
    assert line.split()[2:4] == ["alice", Q]
    assert line.split()[1] in ("pending", "running", "success")  # the worker may be quick

    async def ended() -> bool:
        return (await admin.get_run(job.id, run_id)).status.finished

    await until(ended, timeout=20, what="the run to end")
    table = await jobgate.ok("jobs", "runs", job.id)
    assert [row.split()[:2] for row in table.splitlines()[1:]] == [[run_id, "success"]]
    assert (await admin.get_run(job.id, run_id)).args == {"args": [64]}
    code, out, err = await jobgate("jobs", "runs", job.id, "--status", "failure")
    assert (code, out, err) == (0, "", "no runs with status failure\n")

    logs = await jobgate.ok("jobs", "logs", job.id, run_id)
    assert logs.endswith("info     resized a.png to 64\n")
    page = json.loads(await jobgate.ok("jobs", "logs", job.id, run_id, "--json"))
    assert [item["message"] for item in page["items"]] == ["resized a.png to 64"]


async def test_run_on_another_queue_later(admin: AsyncClient, jobgate: Cli) -> None:
    job = await nightly(admin)
    out = await jobgate.ok("jobs", "run", job.id, "--queue", HELD, "--start-at", "1h", "--json")
    run = json.loads(out)
    assert (run["queue"], run["status"], run["args"]) == (HELD, "pending", job.args)
    found = await admin.get_run(job.id, run["id"])
    assert found.status is RunStatus.PENDING


async def test_delete_asks_unless_yes(
    admin: AsyncClient, jobgate: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await nightly(admin)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not a confirmation
    code, out, err = await jobgate("jobs", "delete", job.id)
    assert (code, out) == (1, "")
    assert err == (
        "jobgate: error: delete removes the job and stdin is not a terminal to confirm it: "
        "pass --yes\n"
    )
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, err = await jobgate("jobs", "delete", job.id)
    assert (code, out) == (1, "")
    assert err.startswith(f"Delete job {job.id} (Thumbnails) and its 0 run records? [y/N] ")
    assert (await admin.get_job(job.id)).id == job.id
    out = await jobgate.ok("jobs", "delete", job.id, "--yes")
    assert out == f"deleted job {job.id} (Thumbnails)\n"
    assert (await admin.list_jobs()).items == []


async def test_refusals_are_one_error_naming_the_field(admin: AsyncClient, jobgate: Cli) -> None:
    job = await nightly(admin)
    missing = "01J00000000000000000000000"
    code, out, err = await jobgate("jobs", "show", missing)
    assert (code, out) == (1, "")
    assert err.startswith("jobgate: error: 404 ")
    code, _, err = await jobgate("jobs", "run", job.id, "--args", '{"kwargs": {"size": "big"}}')
    assert code == 1
    assert err.startswith("jobgate: error: 422 Validation failed")
    assert "\n  args.kwargs.size: " in err
    code, _, err = await jobgate("jobs", "logs", job.id, "not-a-ulid")
    assert code == 1
    assert "run_id" in err
    code, _, err = await jobgate("jobs", "pause", job.id, "--api-key", READER)
    assert code == 1
    assert err.startswith("jobgate: error: 403 Forbidden")
    assert (await admin.get_job(job.id)).active is True


async def test_a_run_of_a_name_no_endpoint_reported_says_which_names_come_close(
    admin: AsyncClient, jobgate: Cli
) -> None:
    """A job of a name the queue accepted then (unknown_tasks: accept), run after the queue
    turned to refusing such names: the refusal's own problem type, read as the CLI prints any
    other (issue 31 item 8)."""
    job = await admin.create_job(title="Typo", task={"queue": Q, "name": "rezise"})
    await admin.patch_queue(Q, unknown_tasks="refuse")
    code, out, err = await jobgate("jobs", "run", job.id)
    assert (code, out) == (1, "")
    assert err == (
        f"jobgate: error: 422 Unknown task name: queue '{Q}' refuses task names no endpoint of "
        "it reported (its policy's unknown_tasks is 'refuse'; 'accept' lets them through)\n"
        f"  task.name: no endpoint of queue '{Q}' reported a task named 'rezise'; did you mean "
        f"'{resize.name}'?\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--args", "{nope"], "argument --args: not JSON"),
        (["--start-at", "tomorrow"], "argument --start-at: not a time: 'tomorrow'"),
        (["--start-at", "2030-01-01T00:00:00"], "argument --start-at: not a time"),
    ],
)
async def test_bad_arguments_are_usage_errors(jobgate: Cli, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exited:
        await jobgate("jobs", "run", "01J00000000000000000000000", *argv)
    assert exited.value.code == 2
    assert message in jobgate.capsys.readouterr().err
