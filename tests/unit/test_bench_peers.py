"""bench/peers.py's command line and arithmetic, without running any system.

The comparison itself starts Redis, gateways and the peers' workers for minutes, which the suite
cannot afford; what can silently go wrong without it is the parsing, the ratio taken within a
run, the best peer picked in the right direction, and the tables.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bench.peers_options import QUICK_TASKS, parse, parse_processes
from bench.peers_report import (
    Metric,
    Results,
    metric_table,
    percentile,
    scaling_table,
    summary_table,
)
from bench.peers_session import latency_ms, per_task_us

ROOT = Path(__file__).parents[2]
RATE = Metric("drain", "tasks/s")
LATENCY = Metric("p50", "ms", higher_is_better=False)


def test_help_runs_without_the_peers_installed_or_imported() -> None:
    done = subprocess.run(
        [sys.executable, "bench/peers.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--processes" in done.stdout
    assert "--quick" in done.stdout


def test_defaults() -> None:
    options = parse([])
    assert (options.tasks, options.repeat, options.processes) == (10_000, 3, (1, 2))
    assert options.systems == ("jobgate", "dramatiq", "taskiq", "celery")
    assert options.races == ("python", "http")
    assert options.latency_samples == 1_000  # 200/s for 5 s
    assert options.warmup == 500


def test_quick_is_small_and_runs_once_whatever_else_is_given() -> None:
    options = parse(["--quick", "--tasks", "50000", "--repeat", "5", "--processes", "1,2,4"])
    assert (options.tasks, options.repeat) == (QUICK_TASKS, 1)
    assert options.processes == (1, 2, 4)
    assert options.latency_samples == 400
    assert options.warmup == 200


def test_process_counts_keep_their_order() -> None:
    assert parse_processes("4, 1,2") == (4, 1, 2)


@pytest.mark.parametrize("text", ["", "1,,2", "0", "1,-2", "two", "1,2,1"])
def test_bad_process_counts_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_processes(text)


@pytest.mark.parametrize(
    "argv",
    [
        ["--systems", "huey"],
        ["--races", "go"],
        ["--races", "http,http"],
        ["--rate", "0"],
        ["--rate", "nan"],
        ["--tasks", "1.5"],
    ],
)
def test_bad_flags_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


def three_runs() -> Results:
    """Run 1 is twice as fast as the others for everyone: the per-run ratios do not move."""
    results = Results()
    for run, scale in enumerate((2.0, 1.0, 1.0)):
        results.record(RATE, "Jobgate, one push each", run, 1_000 * scale)
        results.record(RATE, "Jobgate, pushes of up to 32", run, 4_000 * scale)
        results.record(RATE, "Dramatiq", run, 2_000 * scale)
        results.record(RATE, "taskiq", run, 1_500 * scale)
        results.record(LATENCY, "Jobgate, one push each", run, 3.0 * scale)
        results.record(LATENCY, "Dramatiq", run, 6.0)
        results.record(LATENCY, "taskiq", run, 1.5 * scale)
    return results


def test_rate_ratio_is_to_the_fastest_peer_within_each_run() -> None:
    results = three_runs()
    assert results.best_peer(RATE, 0) == ("Dramatiq", 4_000.0)
    assert results.ratios(RATE, "Jobgate, one push each") == [0.5, 0.5, 0.5]
    assert results.ratio(RATE, "Jobgate, pushes of up to 32") == 2.0
    assert results.median(RATE, "Jobgate, one push each") == 1_000


def test_latency_ratio_is_to_the_lowest_peer() -> None:
    results = three_runs()
    assert results.best_peer(LATENCY, 1) == ("taskiq", 1.5)
    assert results.ratio(LATENCY, "Jobgate, one push each") == 2.0


def test_ratio_is_the_median_of_per_run_ratios_not_a_ratio_of_medians() -> None:
    results = Results()
    for run, (ours, peer) in enumerate([(200.0, 100.0), (100.0, 50.0), (100.0, 400.0)]):
        results.record(RATE, "Jobgate, x", run, ours)
        results.record(RATE, "peer", run, peer)
    assert results.ratios(RATE, "Jobgate, x") == [2.0, 2.0, 0.25]
    assert results.ratio(RATE, "Jobgate, x") == 2.0
    assert results.median(RATE, "Jobgate, x") == results.median(RATE, "peer") == 100.0


def test_runs_without_a_peer_figure_or_with_a_zero_one_give_no_ratio() -> None:
    results = Results()
    results.record(RATE, "Jobgate, x", 0, 10.0)
    results.record(RATE, "Jobgate, x", 1, 10.0)
    results.record(RATE, "peer", 1, 0.0)
    assert results.ratios(RATE, "Jobgate, x") == []
    assert results.ratio(RATE, "Jobgate, x") is None
    assert "| x | 10.0 | 0.00 (peer) | — |" in "\n".join(summary_table(results, [RATE]))


def test_tables_show_medians_runs_and_ratios() -> None:
    results = three_runs()
    table = "\n".join(metric_table(results, RATE))
    assert "#### drain (tasks/s, higher is better)" in table
    assert "| Jobgate, one push each | 1,000 | 2,000, 1,000, 1,000 | 0.50\u00d7 |" in table
    assert "| Dramatiq | 2,000 | 4,000, 2,000, 2,000 |  |" in table
    summary = "\n".join(summary_table(results, [RATE, LATENCY]))
    assert "| pushes of up to 32 | 4,000 | 2,000 (Dramatiq) | 2.00\u00d7 |" in summary
    assert "| one push each | 3.00 | 1.50 (taskiq) | 2.00\u00d7 |" in summary


def test_scaling_table_has_a_line_per_process_count() -> None:
    results = Results()
    drains = {1: Metric("drain, 1", "tasks/s"), 2: Metric("drain, 2", "tasks/s")}
    for processes, metric in drains.items():
        results.record(metric, "Jobgate, one push each", 0, 1_000.0 * processes)
        results.record(metric, "Dramatiq", 0, 2_000.0)
    lines = scaling_table(results, drains)
    assert (
        lines[0] == "| processes | Jobgate, one push each | Dramatiq | one push each ÷ best peer |"
    )
    assert lines[2] == "| 1 | 1,000 | 2,000 | 0.50\u00d7 |"
    assert lines[3] == "| 2 | 2,000 | 2,000 | 1.00\u00d7 |"


def test_percentiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert percentile(values, 0.5) == 51.0
    assert percentile(values, 0.99) == 100.0
    assert percentile([7.0], 0.99) == 7.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.5)


def test_latency_pairs_send_and_start_by_arrival_index() -> None:
    sent = {0: 10.0, 1: 10.5, 2: 11.0}
    started = {1: 10.502, 0: 10.001, 7: 99.0}
    assert latency_ms(sent, started) == pytest.approx([1.0, 2.0])


def test_cpu_per_task_in_microseconds_with_a_total() -> None:
    found = per_task_us({"redis": 1.0, "worker": 2.0}, {"redis": 1.5, "worker": 4.0}, 10_000)
    assert found == pytest.approx({"redis": 50.0, "worker": 200.0, "total": 250.0})


def test_process_tree_cpu_counts_live_children() -> None:
    """uvicorn --workers and the peers' CLIs fork their workers: their CPU must be counted."""
    from bench.proc_stat import cpu_seconds, descendants, tree_cpu_seconds

    burn = (
        "import os, sys, time\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\n"
        "print(os.getpid(), flush=True); sys.stdin.read()"
    )
    spawn = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {burn!r}]).wait()"
    with subprocess.Popen(
        [sys.executable, "-c", spawn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdin is not None
        assert parent.stdout is not None
        with parent.stdin:  # closing it lets the child, then the parent, end
            child = int(parent.stdout.readline())  # the child inherits both pipes
            assert descendants(parent.pid) == [child]
            assert tree_cpu_seconds(parent.pid) - cpu_seconds(parent.pid) >= 0.25


def test_races_keep_the_order_given() -> None:
    assert parse(["--races", "http"]).races == ("http",)
    assert parse(["--races", "HTTP, python"]).races == ("http", "python")


def test_a_session_is_recorded_under_its_race_and_process_count() -> None:
    """CPU at every process count; memory, enqueue and latency only from the full session."""
    from bench.peers import record
    from bench.peers_metrics import (
        ANSWER_P50,
        ANSWER_P99,
        ENQUEUE,
        P50,
        QUEUED,
        cpu_metric,
        drain_metric,
        enqueue_cpu_metric,
    )
    from bench.peers_session import Drain, Session

    found = Session(
        drains={"Jobgate, one push each": Drain(100.0, 50.0, {"redis": 10.0, "total": 30.0}, 400)},
        enqueue={"Jobgate, batches of 500": 9_000.0},
        enqueue_cpu_us={"Jobgate, 1 per request": {"gateway": 140.0}},
        latency_ms={"Jobgate, one push each": [3.0]},
        answer_ms={"Jobgate, .delay()": [2.0], "taskiq": [0.5]},
    )
    results = Results()
    record(results, found, 0, "http", 2, full=False)
    record(results, found, 1, "python", 1, full=True)
    assert results.median(drain_metric("http", 2), "Jobgate, one push each") == 50.0
    assert results.median(cpu_metric("http", "redis", 2), "Jobgate, one push each") == 10.0
    assert results.median(cpu_metric("python", "total", 1), "Jobgate, one push each") == 30.0
    assert results.runs(QUEUED, "Jobgate, one push each") == [400]  # from the full one only
    assert results.runs(ENQUEUE, "Jobgate, batches of 500") == [9_000.0, 9_000.0]
    assert results.median(enqueue_cpu_metric("gateway"), "Jobgate, 1 per request") == 140.0
    assert drain_metric("http", 1) != drain_metric("python", 1)
    assert results.runs(P50, "Jobgate, one push each") == [3.0, 3.0]
    assert results.runs(ANSWER_P50, "Jobgate, .delay()") == [2.0, 2.0]
    assert results.runs(ANSWER_P99, "Jobgate, .delay()") == [2.0, 2.0]
    assert results.ratio(ANSWER_P50, "Jobgate, .delay()") == 4.0  # ÷ taskiq's call


def race_results(jobgate_batched: float, fastest_peer: float) -> Results:
    from bench.peers_metrics import BATCHED, IMPORT, IMPORT_SDK, drain_metric

    results = Results()
    for run in range(3):
        results.record(drain_metric("python", 1), BATCHED, run, jobgate_batched * (run + 1))
        results.record(drain_metric("python", 1), "Celery", run, 10.0 * (run + 1))
        results.record(drain_metric("python", 1), "taskiq", run, fastest_peer * (run + 1))
        results.record(IMPORT, IMPORT_SDK, run, 0.25 + run)  # median 1.25 s
    return results


def test_targets_compare_ratios_and_medians_in_the_right_direction() -> None:
    from bench.peers_targets import targets

    found = {t.text: t for t in targets((1, 2), 64)}
    drain = found["(a) drain ≥ 2\u00d7 the fastest peer, 1 process(es)"]
    imports = found["`import sdk` ≤ 0.3 s"]
    met = race_results(jobgate_batched=200.0, fastest_peer=100.0)
    assert drain.figure(met) == 2.0
    assert drain.met(met) is True
    assert drain.met(race_results(jobgate_batched=199.0, fastest_peer=100.0)) is False
    assert imports.figure(met) == 1.25
    assert imports.met(met) is False  # at most 0.3 s
    unmeasured = found["(a) drain ≥ 2\u00d7 the fastest peer, 2 process(es)"]
    assert unmeasured.met(met) is None


def test_the_enqueue_answers_targets_read_each_way_in_against_the_fastest_peers_call() -> None:
    """The enqueue call's own answer: `.delay()` and a plain POST each ÷ the peer whose enqueue
    call returned soonest in the same run, at most 1 time theirs."""
    from bench.peers_metrics import ANSWER_P50, DELAY, PLAIN_POST
    from bench.peers_targets import targets

    found = {t.text: t for t in targets((1,), 64)}
    delay = found["the enqueue's answer, .delay(), idle, p50 ≤ the fastest peer's enqueue call"]
    plain = found[
        "the enqueue's answer, plain HTTP POST, idle, p50 ≤ the fastest peer's enqueue call"
    ]
    results = Results()
    for run in range(3):
        results.record(ANSWER_P50, DELAY, run, 1.0)
        results.record(ANSWER_P50, PLAIN_POST, run, 2.4)
        results.record(ANSWER_P50, "taskiq", run, 1.2)
        results.record(ANSWER_P50, "Celery", run, 3.0)
    assert delay.figure(results) == pytest.approx(1.0 / 1.2)
    assert delay.met(results) is True
    assert plain.figure(results) == pytest.approx(2.0)
    assert plain.met(results) is False
    assert delay.met(Results()) is None


def test_target_table_marks_met_not_met_and_not_measured() -> None:
    from bench.peers_targets import target_table, targets

    table = target_table(race_results(250.0, 100.0), targets((1, 2), 64))
    assert table[0] == "| target | Jobgate | met |"
    assert "| (a) drain ≥ 2\u00d7 the fastest peer, 1 process(es) | 2.50\u00d7 | met |" in table
    assert "| (a) drain ≥ 2\u00d7 the fastest peer, 2 process(es) | — | not measured |" in table
    assert "| `import sdk` ≤ 0.3 s | 1.25 s | **not met** |" in table
    texts = [line.split(" | ")[0] for line in table[2:-1]]
    assert len(texts) == len(set(texts)) == 16  # 2 drains per race, 12 others


async def test_the_service_verifies_jobgate_pushes_and_takes_the_peers_posts() -> None:
    """A bad or missing signature must not count as a pushed task done."""
    import base64
    from datetime import UTC, datetime

    import httpx
    from standardwebhooks import Webhook

    from bench.service_app import app
    from bench.service_body import BODY, PATH

    secret = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
    now = datetime.now(UTC)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign("msg_1", now, BODY.decode()),
        "content-type": "application/json",
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        assert (await client.post("/jobgate", content=BODY, headers=headers)).status_code == 401
        assert (await client.put("/secret", content=secret)).status_code == 204
        assert (await client.post("/jobgate", content=BODY, headers=headers)).status_code == 204
        tampered = await client.post("/jobgate", content=BODY + b" ", headers=headers)
        assert tampered.status_code == 401
        assert (await client.post("/jobgate", content=BODY)).status_code == 401
        assert (await client.post(PATH, content=BODY)).status_code == 204


def test_keyspace_bytes_grow_with_what_is_stored(redis_url: str) -> None:
    """Memory per queued task is read from the keys themselves, not INFO's used_memory (whose
    client buffers shrank during a peer's enqueue and made its figure negative)."""
    import redis

    from bench.peers_session import keyspace_bytes

    with redis.Redis.from_url(redis_url) as client:
        assert keyspace_bytes(client) == 0
        client.hset("task", mapping={"payload": "x" * 1_000})
        client.rpush("queue", *(f"message-{i}" for i in range(100)))
        one = keyspace_bytes(client)
        assert one > 1_000 + 100 * len("message-00")
        client.xadd("stream", {"data": "y" * 500})
        assert keyspace_bytes(client) - one > 500


def test_latency_is_flagged_when_arrivals_near_the_single_enqueue_rate() -> None:
    from bench.peers_metrics import ENQUEUE, single_in_flight
    from bench.peers_targets import backlog_note

    results = Results()
    results.record(ENQUEUE, single_in_flight(64), 0, 264.0)
    note = backlog_note(results, 64, 200.0)
    assert note[0].startswith("Note: Jobgate's single enqueues ran at 264/s with 64 in flight")
    assert backlog_note(results, 64, 100.0) == []  # 264/s is over twice 100/s
    assert backlog_note(Results(), 64, 200.0) == []  # not measured: nothing to say
