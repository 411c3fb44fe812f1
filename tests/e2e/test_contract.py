"""openapi.yaml is the truth: Schemathesis (every check, stateful through the spec's links)
against a real gateway process finds nothing the spec does not describe. Its hooks
(schemathesis_hooks.py) only point generated references at things that exist; no rule of a
request is left to them."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from tests.e2e.conftest import ADMIN, ROOT, Cluster

pytestmark = pytest.mark.e2e

# Per operation and phase (the coverage phase, which tries each rule's edges, is not capped by
# it): 8 keeps make test under 6 minutes on a clean clone; an outside run (docs/api.md, "How it
# is checked") takes hundreds.
MAX_EXAMPLES = os.environ.get("CONTRACT_EXAMPLES", "8")
# Hang guards, not expectations: the run is a fixed amount of CPU work (about a minute on a quiet
# machine), and on two cores shared with the rest of the suite and stress-ng it took 380 s.
RUN_TIMEOUT = 840
GROUP = "seeded"  # the seeded task's group: what a generated after_group is made to name


# The spec's operations in four parts, each run by its own test so that parallel workers share
# the work (one run of the whole spec was the suite's longest test, 110 s). Links between
# operations (the stateful phase) stay within a part: a job's runs with its jobs, a queue's
# endpoints with its queues; tasks find the queue made for them above.
INCLUDED = {
    "jobs": r"^/v1/jobs",
    "callbacks-and-reads": (
        r"^/(v1/(callbacks|deadletters|running|keys|events|triggers)|healthz|readyz|metrics)"
    ),
    "tasks": r"^/v1/(queues/\{queue\}/tasks|tasks)",
}
PARTS = {
    **{part: ["--include-path-regex", regex] for part, regex in INCLUDED.items()},
    "queues": ["--exclude-path-regex", "|".join(f"({regex})" for regex in INCLUDED.values())],
}


@pytest.mark.timeout(RUN_TIMEOUT + 60)
@pytest.mark.parametrize("part", PARTS)
def test_schemathesis_finds_no_failure(cluster: Cluster, part: str) -> None:
    gateway = cluster.gateway()
    with cluster.api() as api:  # data for the generated requests to find
        policy = {"key_concurrency": {"limit": 5}}  # so that a concurrency_key is welcome
        assert api.put("/v1/queues/st", json=policy).is_success
        seed = api.post("/v1/queues/st/tasks", json={"name": "seed", "group": GROUP})
        assert seed.is_success
    environ = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.e2e.schemathesis_hooks",
        "CONTRACT_ENDPOINT_URL": f"{gateway}/healthz",
        "CONTRACT_TASK_ID": seed.json()["id"],
        "CONTRACT_GROUP": GROUP,
        "PYTHONPATH": str(ROOT),
    }
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        str(ROOT / "openapi.yaml"),
        "--url",
        gateway,
        "--header",
        f"Authorization: Bearer {ADMIN}",
        "--checks",
        "all",  # positive_data_acceptance among them: a valid request refused (400, 422) fails
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        MAX_EXAMPLES,
        "--seed",
        os.environ.get("CONTRACT_SEED", "7"),  # another seed: CONTRACT_SEED=8 make test
        "--workers",
        "1",
        "--request-timeout",
        "10",
        "--no-color",
        *PARTS[part],
    ]
    run = subprocess.run(
        command,
        env=environ,
        cwd=cluster.tmp,  # Schemathesis keeps a .schemathesis/ folder in its working directory
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    assert httpx.get(f"{gateway}/healthz").is_success
