"""The admin templates keep the rules a strict CSP and CSRF protection rely on."""

from __future__ import annotations

import re

from gateway.admin.render import TEMPLATES, environment

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
        if path.name.startswith("_"):
            page = TEMPLATES / path.name[1:]
            assert f'{{% include "{path.name}" %}}' in page.read_text(), path.name
        elif path.name != "base.html":
            assert text.startswith('{% extends "base.html" %}'), path.name


def test_admin_pages_reach_redis_only_through_the_services() -> None:
    admin = TEMPLATES.parent
    for path in admin.rglob("*.py"):
        text = path.read_text()
        assert "gateway.store" not in text, path.name
        assert "import redis" not in text, path.name
