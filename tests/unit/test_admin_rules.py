"""The admin templates keep the rules a strict CSP and CSRF protection rely on."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from gateway.admin.charts import ended_text, spark
from gateway.admin.render import TEMPLATES, ago, duration, environment, when
from gateway.services.activity import Throughput
from sdk.wire import TaskState

PAGES = sorted(TEMPLATES.glob("*.html"))


def test_every_post_form_carries_the_csrf_field() -> None:
    forms = 0
    for path in PAGES:
        for form in re.findall(r"<form\b[^>]*>.*?</form>", path.read_text(), re.S):
            if re.search(r'method="post"', form):
                forms += 1
                assert "{{ csrf_field() }}" in form, f"{path.name}: {form[:80]}"
    assert forms >= 6  # logout, sign-in, pause, resume, cancel, retry, resubmit


def test_no_inline_script_style_or_event_handler() -> None:
    for path in PAGES:
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), path.name
        assert "<style" not in text, path.name
        assert not re.search(r"\sstyle=", text), path.name
        assert not re.search(r"\son[a-z]+=", text), path.name
        assert "hx-on" not in text, path.name


def test_every_page_extends_the_layout_and_every_partial_is_included_by_its_page() -> None:
    env = environment()
    for path in PAGES:
        env.get_template(path.name)  # parses
        text = path.read_text()
        if path.name.startswith("_"):  # by its page, or (a shared part) by some pages
            include = f'{{% include "{path.name}" %}}'
            page = TEMPLATES / path.name[1:]
            if page.exists():
                assert include in page.read_text(), path.name
            else:
                assert any(include in other.read_text() for other in PAGES), path.name
        elif path.name != "base.html":
            assert text.startswith('{% extends "base.html" %}'), path.name


def test_admin_pages_reach_redis_only_through_the_services() -> None:
    admin = TEMPLATES.parent
    for path in admin.rglob("*.py"):
        text = path.read_text()
        assert "gateway.store" not in text, path.name
        assert "import redis" not in text, path.name


def test_durations_and_times_read_short() -> None:
    assert [duration(s) for s in (None, 0.85, 12.34, 245, 7380, 200_000)] == [
        "-",
        "850 ms",
        "12.3 s",
        "4 min 05 s",
        "2 h 03 min",
        "2 d 7 h",
    ]
    now = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
    assert ago(now - timedelta(seconds=90), now) == "1 min 30 s ago"
    assert ago(now + timedelta(seconds=5), now) == "in 5.0 s"
    assert when(now) == "2030-01-01 12:00:00 UTC"


def test_throughput_bars_scale_to_the_busiest_minute() -> None:
    finished = {
        TaskState.SUCCEEDED: [0, 90, 45, 1],
        TaskState.FAILED: [0, 0, 5, 0],
        TaskState.DEAD: [0, 10, 0, 0],
        TaskState.CANCELLED: [0, 0, 0, 0],
    }
    t = Throughput("q", 60, datetime(2030, 1, 1, tzinfo=UTC), finished)
    chart = spark(t, height=30)
    drawn = chart.bars
    assert [b.height for b in drawn] == [0, 30, 15, 1]  # a quiet minute still shows
    assert [b.failed for b in drawn] == [0, 10, 5, 0]
    assert [b.x for b in drawn] == [0, 10, 20, 30]
    assert chart.top == 100  # the scale: the busiest minute
    # the states' own names, as the counters say them (issue 31): never "failed" for dead
    assert [b.text for b in drawn] == [
        "0 succeeded",
        "90 succeeded, 10 dead",
        "45 succeeded, 5 failed",
        "1 succeeded",
    ]
    assert chart.text == "136 succeeded, 5 failed, 10 dead"
    assert ended_text({TaskState.CANCELLED: 1_200}) == "0 succeeded, 1,200 cancelled"
