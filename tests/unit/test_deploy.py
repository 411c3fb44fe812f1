"""deploy/ holds together without Docker or a cluster: the Dockerfiles pass hadolint, the compose
file matches the Compose Specification and the files it mounts, the Kubernetes manifests
validate strictly against one Kubernetes version's schemas, the KEDA example (a CRD those
schemas lack) has the fields KEDA reads, and every ``JOBGATE_*`` or ``OTEL_*`` variable they set
is one the program reading it knows. The checks are static: no image is built here."""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import opentelemetry.environment_variables
import opentelemetry.sdk.environment_variables
import pytest
import yaml

from gateway.dispatch.dispatcher import Dispatcher
from gateway.serving.tcp_server import GRACE_SECONDS
from gateway.settings import Settings
from sdk.client import ENV_API_KEY, ENV_URL

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
BIN = Path(sys.executable).parent
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERFILES = [DOCKERFILE, *(ROOT / "examples" / e / "Dockerfile" for e in ("hello", "cloud-run"))]
HELLO_WORKER = ROOT / "examples" / "hello" / "worker.py"
KUBERNETES_VERSION = "1.31.0"  # kubernetes-validate ships this version's schemas
GATEWAY_SERVICES = ("gateway-1", "gateway-2")
LIFESPAN_WAITS = 5 + 5  # gateway/app.py: the recoverer's last step, then the job/callback loops
OTEL_VARIABLES = {
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_CERTIFICATE",
}
"""The OpenTelemetry SDK variables deploy/ may set (docs/observability.md lists what they do)."""


# --- Dockerfiles ----------------------------------------------------------------------------


def hadolint(dockerfile: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [BIN / "hadolint", "--config", ROOT / ".hadolint.yaml", "--format", "json", dockerfile],
        capture_output=True,
        text=True,
        timeout=30,
    )
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    assert (done.returncode == 0) == (not findings), done.stderr
    return findings


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_dockerfiles_pass_hadolint(dockerfile: Path) -> None:
    assert hadolint(dockerfile) == []


def test_hadolint_finds_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    assert {f["code"] for f in hadolint(bad)} >= {"DL3007", "DL3013", "DL3042"}


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    lines = (line.strip() for line in text.splitlines())
    pairs = (line.split(None, 1) for line in lines if line and not line.startswith("#"))
    return [(pair[0].upper(), pair[1] if len(pair) > 1 else "") for pair in pairs]


def stages(dockerfile: Path) -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions(dockerfile):
        if instruction[0] == "FROM":
            found.append([])
        found[-1].append(instruction)
    return found


def test_the_image_carries_only_the_venv_and_runs_unprivileged() -> None:
    builder, final = stages(DOCKERFILE)
    base = builder[0][1].split()[0]
    assert re.fullmatch(r"python:3\.1[1-9]\.\d+-slim(-\w+)?", base), base
    assert final[0] == ("FROM", base)
    assert [args for op, args in final if op == "COPY"] == [
        "--from=builder /opt/jobgate /opt/jobgate"
    ]
    assert not [args for op, args in final if op == "RUN" and "apt-get" in args]
    (user,) = [args for op, args in final if op == "USER"]
    assert user.split(":")[0] not in ("0", "root")
    final_ops = dict(final)
    assert "/healthz" in final_ops["HEALTHCHECK"]
    assert json.loads(final_ops["ENTRYPOINT"]) == ["jobgate"]
    assert json.loads(final_ops["CMD"]) == ["serve"]
    assert final_ops["EXPOSE"] == "8787"


def dockerfile_env(dockerfile: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for op, args in instructions(dockerfile):
        if op == "ENV":
            env.update(pair.split("=", 1) for pair in args.split())
    return env


def dockerignored(path: str) -> bool:
    patterns = [p for p in (ROOT / ".dockerignore").read_text().splitlines() if p.strip()]
    patterns = [p for p in patterns if not p.startswith("#")]
    assert not [p for p in patterns if p.startswith("!")], "negations: use a real matcher"
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch(prefix, pattern) or fnmatch(prefix, pattern.removeprefix("**/"))
        for pattern in patterns
        for prefix in prefixes
    )


def test_the_build_context_keeps_what_the_images_copy_and_nothing_local() -> None:
    copied = [
        source
        for dockerfile in DOCKERFILES
        for op, args in instructions(dockerfile)
        if op == "COPY" and not args.startswith("--from")
        for source in args.split()[:-1]
    ]
    assert "gateway" in copied
    assert [source for source in copied if dockerignored(source)] == []
    assert "dist/jobgate_sdk-0.1.0-py3-none-any.whl" in copied  # the Cloud Run example's SDK
    for local in (".git", ".venv", ".jobgate", ".env", "gateway/__pycache__", "tests"):
        assert dockerignored(local), local


# --- compose --------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def with_defaults(value: str) -> str:
    """A compose value as Compose sees it with none of its ``${NAME:-default}`` set."""
    assert "${" not in re.sub(r"\$\{\w+:-[^}]*\}", "", value), value
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)


def check_jsonschema(schema: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BIN / "check-jsonschema", "--builtin-schema", schema, path],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_compose_file_follows_the_compose_specification(tmp_path: Path) -> None:
    done = check_jsonschema("vendor.compose-spec", DEPLOY / "compose.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    broken = compose()
    broken["services"]["redis"]["restart_policy"] = "always"  # not a service field
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(broken))
    assert check_jsonschema("vendor.compose-spec", tmp_path / "compose.yaml").returncode == 1


def test_compose_runs_every_part_from_files_that_exist() -> None:
    services = compose()["services"]
    assert set(services) == {
        *GATEWAY_SERVICES,
        *("redis", "proxy", "worker", "otel-collector", "prometheus", "grafana"),
    }
    mounted = 0
    for name, service in services.items():
        assert re.fullmatch(r"[\w./-]+:[\w.-]+", service["image"]), name  # tagged
        assert not service["image"].endswith(":latest"), name
        if "build" in service:
            context = DEPLOY / service["build"]["context"]
            assert (context / service["build"]["dockerfile"]).is_file(), name
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source}"
                mounted += 1
    assert mounted >= 6
    redis = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis
    assert "--maxmemory-policy noeviction" in redis


def test_compose_wires_the_parts_to_each_other() -> None:
    file = compose()
    services = file["services"]
    gateway = services[GATEWAY_SERVICES[0]]["environment"]
    public = urlsplit(gateway["JOBGATE_PUBLIC_URL"])
    nginx = (DEPLOY / "proxy" / "nginx.conf").read_text()
    assert f"listen {public.port};" in nginx
    assert public.hostname == "proxy"
    assert re.findall(r"server (\S+):(\d+)", nginx) == [(s, "8787") for s in GATEWAY_SERVICES]
    assert services["worker"]["environment"][ENV_URL] == gateway["JOBGATE_PUBLIC_URL"]

    collector = urlsplit(gateway["OTEL_EXPORTER_OTLP_ENDPOINT"])
    assert collector.hostname in services
    otel = yaml.safe_load((DEPLOY / "otel-collector" / "config.yaml").read_text())
    assert otel["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(f":{collector.port}")

    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = prometheus["scrape_configs"]
    assert job["static_configs"][0]["targets"] == [f"{s}:8787" for s in GATEWAY_SERVICES]
    (key,) = services["prometheus"]["configs"]
    assert job["authorization"]["credentials_file"] == key["target"]
    scrape_key = with_defaults(file["configs"][key["source"]]["content"])
    keys = json.loads(with_defaults(gateway["JOBGATE_API_KEYS"]))
    assert {"key": scrape_key, "scopes": ["metrics"], "name": "prometheus"} in keys
    assert prometheus["rule_files"] == ["alerts.yaml"]

    provisioning = DEPLOY / "grafana" / "provisioning"
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())[
        "datasources"
    ]
    assert urlsplit(source["url"]).hostname == "prometheus"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "jobgate.yaml").read_text())[
        "providers"
    ]
    dashboards = [v for v in services["grafana"]["volumes"] if v.endswith(".json:ro")]
    assert [v.split(":")[1].rsplit("/", 1)[0] for v in dashboards] == [provider["options"]["path"]]


# --- Kubernetes -----------------------------------------------------------------------------


def manifests() -> list[dict[str, Any]]:
    """Every resource in deploy/k8s/*.yaml (not keda/: KEDA's CRDs have no schema there)."""
    found: list[dict[str, Any]] = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def resource(kind: str, name: str) -> dict[str, Any]:
    (found,) = [m for m in manifests() if (m["kind"], m["metadata"]["name"]) == (kind, name)]
    return found


def test_the_manifests_validate_strictly() -> None:
    found = manifests()
    assert len(found) == 9
    assert {m["kind"] for m in found} == {
        "Namespace",
        "ConfigMap",
        "Secret",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    }
    for manifest in found:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
        if manifest["kind"] != "Namespace":
            assert manifest["metadata"]["namespace"] == "jobgate"


def test_strict_validation_refuses_an_unknown_field() -> None:
    deployment = copy.deepcopy(resource("Deployment", "jobgate-gateway"))
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_gateway_is_probed_and_given_time_to_stop() -> None:
    pod = resource("Deployment", "jobgate-gateway")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]  # the HPA's utilisation needs it
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    pushes = inspect.signature(Dispatcher.stop).parameters["grace"].default
    stopping = pre_stop + GRACE_SECONDS + LIFESPAN_WAITS + pushes
    assert stopping < pod["terminationGracePeriodSeconds"] <= stopping + 30


def test_the_gateway_service_budget_and_autoscaler_find_its_pods() -> None:
    deployment = resource("Deployment", "jobgate-gateway")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert resource("Service", "jobgate")["spec"]["selector"].items() <= labels.items()
    budget = resource("PodDisruptionBudget", "jobgate-gateway")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    scaler = resource("HorizontalPodAutoscaler", "jobgate-gateway")["spec"]
    assert scaler["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "jobgate-gateway",
    }
    assert budget["minAvailable"] < scaler["minReplicas"]
    assert [m["resource"]["name"] for m in scaler["metrics"]] == ["cpu"]


SCALED_OBJECT_SPEC = {
    "scaleTargetRef",
    "pollingInterval",
    "cooldownPeriod",
    "initialCooldownPeriod",
    "idleReplicaCount",
    "minReplicaCount",
    "maxReplicaCount",
    "fallback",
    "advanced",
    "triggers",
}
PROMETHEUS_TRIGGER = {
    "serverAddress",
    "query",
    "threshold",
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "queryParameters",
    "unsafeSsl",
}


def test_the_keda_example_scales_the_worker_on_queue_depth() -> None:
    """Checked by hand, field by field: kubernetes-validate has no schema for KEDA's CRDs."""
    (scaled,) = yaml.safe_load_all(
        (DEPLOY / "k8s" / "keda" / "hello-worker-scaledobject.yaml").read_text()
    )
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = scaled["spec"]
    assert set(spec) <= SCALED_OBJECT_SPEC
    worker = resource("Deployment", spec["scaleTargetRef"]["name"])
    assert worker["metadata"]["namespace"] == scaled["metadata"]["namespace"]
    assert 1 <= spec["minReplicaCount"] < spec["maxReplicaCount"]
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    metadata = trigger["metadata"]
    assert {"serverAddress", "query", "threshold"} <= set(metadata) <= PROMETHEUS_TRIGGER
    words = set(re.findall(r"\b([a-z_]+)\s*\{", metadata["query"]))
    assert words == {"queue_depth"}
    assert float(metadata["threshold"]) > 0


# --- environment variables ------------------------------------------------------------------


def gateway_environments() -> Iterator[tuple[str, dict[str, str]]]:
    """(where, variables) for each place deploy/ configures a gateway."""
    yield "deploy/Dockerfile", dockerfile_env(DOCKERFILE)
    services = compose()["services"]
    for name in GATEWAY_SERVICES:
        yield (
            f"compose {name}",
            {k: with_defaults(v) for k, v in services[name]["environment"].items()},
        )
    pod = resource("Deployment", "jobgate-gateway")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    for source in container["envFrom"]:
        if "configMapRef" in source:
            env |= resource("ConfigMap", source["configMapRef"]["name"])["data"]
        else:
            env |= resource("Secret", source["secretRef"]["name"])["stringData"]
    yield "k8s jobgate-gateway", env


def test_the_otel_variables_listed_here_are_the_sdks() -> None:
    standard = {
        value
        for module in (opentelemetry.environment_variables, opentelemetry.sdk.environment_variables)
        for name, value in vars(module).items()
        if name.startswith("OTEL_")
    }
    assert standard >= OTEL_VARIABLES


def test_every_gateway_variable_is_a_setting_or_opentelemetrys() -> None:
    checked = 0
    for where, env in gateway_environments():
        for name in env:
            if name.startswith("JOBGATE_"):
                assert name.removeprefix("JOBGATE_").lower() in Settings.model_fields, where
            elif name.startswith("OTEL_"):
                assert name in OTEL_VARIABLES, f"{where}: {name}"
            checked += 1
    assert checked > 15


def test_every_gateway_configuration_is_valid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith("JOBGATE_"):
            monkeypatch.delenv(name)
    for where, env in gateway_environments():
        with monkeypatch.context() as patch:
            for name, value in env.items():
                if name.startswith("JOBGATE_"):
                    patch.setenv(name, value)
            settings = Settings(_env_file=None)  # type: ignore[call-arg]
            if where == "deploy/Dockerfile":
                assert settings.host == "0.0.0.0"  # reachable from outside the container
            else:
                assert settings.api_keys, where
                assert settings.public_url, where


def test_every_worker_variable_is_read_by_the_worker() -> None:
    source = HELLO_WORKER.read_text()
    read = {ENV_URL, ENV_API_KEY} | set(re.findall(r"\"([A-Z][A-Z_]+)\"", source))
    assert {"JOBGATE_WORKER_SECRET", "HELLO_HOST", "HELLO_URL"} <= read
    compose_env = set(compose()["services"]["worker"]["environment"])
    pod = resource("Deployment", "hello-worker")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    k8s_env = {e["name"] for e in container["env"]}
    assert "JOBGATE_WORKER_SECRET" in k8s_env
    assert ENV_URL in compose_env
    assert compose_env <= read
    assert k8s_env <= read
