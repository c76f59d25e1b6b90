"""Every file in deploy/ parses, and every ctxstore command and CTXSTORE_* variable it uses is
one the CLI knows: a renamed flag or variable cannot leave a broken deployment behind."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxstore.cli.main import build_parser
from ctxstore.worker import command

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KNOWN_ENV = {
    command.URL_ENV,
    command.SUMMARY_MODEL_ENV,
    command.CONCURRENCY_ENV,
    command.NAMESPACES_ENV,
    command.LIVE_FILE_ENV,
}


def yaml_files() -> list[Path]:
    return sorted(DEPLOY.rglob("*.yml")) + sorted(DEPLOY.rglob("*.yaml"))


def walk(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for value in node.values():
            found += walk(value)
    elif isinstance(node, list):
        for value in node:
            found += walk(value)
    return found


def commands_in(node: Any) -> list[list[str]]:
    return [
        [str(part) for part in item]
        for item in walk(node)
        if isinstance(item, list) and item and item[0] == "ctxstore"
    ]


def env_names_in(node: Any) -> set[str]:
    names: set[str] = set()
    for item in walk(node):
        if isinstance(item, dict):
            names |= {key for key in item if isinstance(key, str) and key.startswith("CTXSTORE_")}
    return names


def test_the_expected_files_exist() -> None:
    for name in (
        "docker-compose.yml",
        "Dockerfile",
        "k8s/worker-deployment.yaml",
        "k8s/configmap.yaml",
        "k8s/secret.yaml",
    ):
        assert (DEPLOY / name).is_file(), name


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: p.name)
def test_yaml_parses_and_uses_only_known_commands_and_variables(path: Path) -> None:
    documents = list(yaml.safe_load_all(path.read_text()))
    assert documents
    parser = build_parser()
    for document in documents:
        for argv in commands_in(document):
            parser.parse_args(argv[1:])  # raises on an unknown command or flag
        assert env_names_in(document) <= KNOWN_ENV


def test_compose_runs_redis_durably_with_a_healthcheck_and_the_worker() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    redis = compose["services"]["redis"]
    assert "healthcheck" in redis
    conf = (DEPLOY / "redis.conf").read_text()
    assert re.search(r"^appendonly yes", conf, re.MULTILINE)
    assert re.search(r"^maxmemory-policy noeviction", conf, re.MULTILINE)
    assert "--aclfile" in redis["command"]
    assert any("acl.conf" in volume for volume in redis["volumes"])
    worker = compose["services"]["worker"]
    assert worker["build"]["dockerfile"] == "deploy/Dockerfile"
    assert worker["command"][:2] == ["ctxstore", "worker"]


def test_k8s_probes_are_the_pods_own_and_grace_outlasts_a_job() -> None:
    deployment = yaml.safe_load((DEPLOY / "k8s/worker-deployment.yaml").read_text())
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    assert container["livenessProbe"]["exec"]["command"] == ["ctxstore", "worker", "--live"]
    assert container["readinessProbe"]["exec"]["command"] == ["ctxstore", "worker", "--ready"]
    job_timeout_ms = int(container["command"][container["command"].index("--job-timeout-ms") + 1])
    assert spec["terminationGracePeriodSeconds"] * 1000 > job_timeout_ms
    assert container["resources"]["limits"]
    configmap = yaml.safe_load((DEPLOY / "k8s/configmap.yaml").read_text())
    assert set(configmap["data"]) <= KNOWN_ENV
    assert command.URL_ENV not in configmap["data"]  # it may hold a password: a Secret's


def test_k8s_takes_the_url_from_a_secret_pins_the_image_and_runs_unprivileged() -> None:
    deployment = yaml.safe_load((DEPLOY / "k8s/worker-deployment.yaml").read_text())
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    env = {item["name"]: item for item in container["env"]}
    assert env[command.URL_ENV]["valueFrom"]["secretKeyRef"]["name"] == "ctxstore-worker"
    secret = yaml.safe_load((DEPLOY / "k8s/secret.yaml").read_text())
    assert secret["kind"] == "Secret"
    assert command.URL_ENV in secret["stringData"]
    image = container["image"]
    assert ":" in image
    assert not image.endswith(":latest")
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    live_file = env[command.LIVE_FILE_ENV]["value"]
    mounts = [mount["mountPath"] for mount in container["volumeMounts"]]
    assert any(live_file.startswith(mount.rstrip("/") + "/") for mount in mounts)
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^USER 10001$", dockerfile, re.MULTILINE)


def test_the_dockerfile_command_is_a_cli_command() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    match = re.search(r"^CMD (\[.*\])$", text, re.MULTILINE)
    assert match is not None
    argv = json.loads(match.group(1))
    assert argv[0] == "ctxstore"
    build_parser().parse_args(argv[1:])
    assert set(re.findall(r"CTXSTORE_[A-Z_]+", text)) <= KNOWN_ENV
