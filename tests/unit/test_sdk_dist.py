"""The light distribution, jobgate-sdk (packaging/jobgate-sdk): its wheel holds ``sdk`` and
nothing of the gateway's, and requires none of the gateway's dependencies.

The sdist and the wheel are built once here as ``make sdk-dist`` builds them (the wheel from the
sdist), but without an isolated build environment (the venv's setuptools; no index needed), in
a copy of the packaging folder beside a link to this tree's ``sdk``, so the build writes nothing
into the repository.
"""

from __future__ import annotations

import tarfile
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.local_steps import build_sdk_dist

ROOT = Path(__file__).resolve().parents[2]
PACKAGING = ROOT / "packaging" / "jobgate-sdk"

# What the gateway needs and an SDK user must not be made to install (issue 20).
GATEWAY_ONLY = {
    "redis",
    "hypercorn",
    "aioquic",
    "apscheduler",
    "jinja2",
    "uvicorn",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-exporter-prometheus",
    "prometheus-client",
    "pydantic-settings",
}


def _project(path: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(path.read_text())["project"]
    return project


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = build_sdk_dist(tmp_path_factory.mktemp("tree"))
    # `make sdk-dist` printed setuptools' deprecation of a license table four times (issue 31).
    said = (out / "build.log").read_text()
    assert "deprecated" not in said.lower(), said[-2000:]
    return out


def _wheel(dist: Path) -> zipfile.ZipFile:
    (wheel,) = dist.glob("jobgate_sdk-*-py3-none-any.whl")
    return zipfile.ZipFile(wheel)


def _metadata(dist: Path) -> tuple[list[Requirement], dict[str, str]]:
    with _wheel(dist) as wheel:
        (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(wheel.read(name).decode())
    requirements = [Requirement(r) for r in message.get_all("Requires-Dist") or []]
    return requirements, {"Name": message["Name"], "Version": message["Version"]}


def test_the_wheel_holds_every_file_of_sdk_and_nothing_else(dist: Path) -> None:
    with _wheel(dist) as wheel:
        names = wheel.namelist()
    packaged = {n for n in names if not n.startswith("jobgate_sdk-")}
    expected = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "sdk").rglob("*")
        if p.suffix in (".py", ".txt") or p.name == "py.typed"
    }
    assert packaged == expected
    assert "sdk/py.typed" in packaged
    assert "sdk/wire/timezones.txt" in packaged
    assert not [n for n in names if n.startswith("gateway")]


def test_the_wheel_requires_none_of_the_gateways_dependencies(dist: Path) -> None:
    requirements, header = _metadata(dist)
    assert header == {
        "Name": "jobgate-sdk",
        "Version": _project(ROOT / "pyproject.toml")["version"],
    }
    required = {r.name.lower() for r in requirements if r.marker is None}
    assert required == {
        "pydantic",
        "httpx",
        "aiohttp",
        "standardwebhooks",
        "python-ulid",
    }
    assert not required & GATEWAY_ONLY
    assert not {n for n in required if n.startswith("opentelemetry")}
    extras = {str(r.marker): r.name for r in requirements if r.marker is not None}
    assert extras == {'extra == "otel"': "opentelemetry-api", 'extra == "lambda"': "mangum"}


def test_each_requirement_is_spelled_as_in_the_main_distribution() -> None:
    # One version range per dependency across the two distributions, so they cannot drift.
    main = _project(ROOT / "pyproject.toml")
    light = _project(PACKAGING / "pyproject.toml")
    main_extras = main["optional-dependencies"]
    light_extras = light["optional-dependencies"]
    spelled = {*main["dependencies"], *main_extras["lambda"]}
    assert set(light["dependencies"]) <= spelled
    assert set(light_extras["otel"]) <= spelled
    assert light_extras["lambda"] == main_extras["lambda"]
    assert light["version"] == main["version"]
    assert light["requires-python"] == main["requires-python"]


def test_the_sdist_holds_the_files_not_the_link(dist: Path) -> None:
    (sdist,) = dist.glob("jobgate_sdk-*.tar.gz")
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1]: m for m in archive.getmembers() if "/" in m.name}
    assert members["sdk/__init__.py"].isfile()
    assert members["sdk/wire/timezones.txt"].isfile()
    assert not [name for name, m in members.items() if m.issym()]
    assert not [name for name in members if name.startswith("gateway")]
