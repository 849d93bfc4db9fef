"""deploy/kubernetes: the manifests parse, and the fields that matter agree with the code.

The container args are parsed by the real CLI (so every option exists and the ports are the values the commands
use), the ports and Prometheus annotations match them, the probes are served: a worker started with the
manifest's options answers every probe path and the scrape path, and so does the prober's metrics server. The
Secret's keys are environment variables the commands read, or `os.environ/` references the config accepts.
"""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.main import get_command

from coolant.cli.commands import app
from coolant.config.loader import load_config
from coolant.config.runtime import resolve_secret
from coolant.probe.metrics import ProbeMetrics
from tests.support.ports import free_port
from tests.support.worker import Case

ROOT = Path(__file__).resolve().parents[2]
KDIR = ROOT / "deploy" / "kubernetes"


def manifests() -> list[dict[str, Any]]:
    return [doc for f in sorted(KDIR.glob("*.yaml")) if f.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(f.read_text()) if doc]


def one(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in manifests() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} manifests"
    return found[0]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]  # type: ignore[no-any-return]


def commands() -> dict[str, Any]:
    """The CLI's commands, as click builds them from the typer app."""
    return get_command(app).commands  # type: ignore[attr-defined,no-any-return]


def parse_args(args: list[str]) -> dict[str, Any]:
    """The options the real CLI makes of a container's args (fails on an unknown option)."""
    command = commands()[args[0]]
    return command.make_context(args[0], list(args[1:])).params


def port_of(c: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    return next(int(p["containerPort"]) for p in c["ports"] if p["name"] == port)


def probes(c: dict[str, Any]) -> list[dict[str, Any]]:
    found = [c[k]["httpGet"] for k in ("readinessProbe", "livenessProbe", "startupProbe") if k in c]
    assert found, f"{c['name']} has no HTTP probes"
    return found


def scrape_path(deployment: dict[str, Any]) -> str:
    return str(deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/path"])


def writable(c: dict[str, Any], path: str) -> bool:
    return any(path.startswith(m["mountPath"]) and not m.get("readOnly") for m in c["volumeMounts"])


def test_manifests_parse_and_are_complete() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in manifests()}
    assert {("Deployment", "coolant-worker"), ("Deployment", "coolant-prober"),
            ("PodDisruptionBudget", "coolant-worker"), ("Secret", "coolant-connection"),
            ("Service", "coolant-worker")} <= kinds
    listed = yaml.safe_load((KDIR / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted(f.name for f in KDIR.glob("*.yaml") if f.name != "kustomization.yaml")
    worker = one("Deployment", "coolant-worker")
    assert worker["spec"]["replicas"] >= 2
    pdb = one("PodDisruptionBudget", "coolant-worker")
    assert pdb["spec"]["selector"] == worker["spec"]["selector"]
    assert pdb["spec"]["maxUnavailable"] < worker["spec"]["replicas"]
    service = one("Service", "coolant-worker")
    assert service["spec"]["selector"] == worker["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("name", "port_option", "bind_option"),
    [("coolant-worker", "web_port", "web_bind"), ("coolant-prober", "metrics_port", "metrics_bind")],
)
def test_ports_config_and_security(name: str, port_option: str, bind_option: str) -> None:
    dep = one("Deployment", name)
    c = container(dep)
    params = parse_args(c["args"])
    port = params[port_option]
    assert params[bind_option] == "0.0.0.0", "the kubelet and Prometheus reach the pod's address, not loopback"
    assert [p["containerPort"] for p in c["ports"]] == [port]
    for probe in probes(c):
        assert port_of(c, probe["port"]) == port
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == port
    # the config file is the ConfigMap's litellm.yaml, mounted where --config points
    config = Path(str(params["config"]))
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == str(config.parent))
    volume = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "coolant-litellm"
    assert [i["path"] for i in volume["configMap"]["items"]] == [config.name]
    pod_security = dep["spec"]["template"]["spec"]["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] == 10001  # the Dockerfile's user
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert writable(c, "/tmp")
    if "data_dir" in params:
        assert writable(c, str(params["data_dir"]))
    assert {"secretRef": {"name": "coolant-connection"}} in c["envFrom"]


def test_secret_keys_are_read_by_coolant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    envvars = {p.envvar for cmd in ("worker", "probe") for p in commands()[cmd].params if p.envvar}
    keys = set(one("Secret", "coolant-connection")["stringData"])
    refs = keys - envvars
    assert {"KAFKA_BOOTSTRAP", "REDIS_URL", "COOLANT_ADMIN_TOKEN"} <= keys - refs
    # the rest are os.environ/ references the config's coolant: section takes
    assert refs == {"KAFKA_SASL_PASSWORD", "REDIS_PASSWORD"}
    sample = yaml.safe_load((ROOT / "examples" / "litellm.yaml").read_text())
    sample.setdefault("coolant", {})
    sample["coolant"]["kafka"] = {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_plain_username":
                                  "coolant", "sasl_plain_password": "os.environ/KAFKA_SASL_PASSWORD"}
    sample["coolant"]["redis"] = {"password": "os.environ/REDIS_PASSWORD"}
    path = tmp_path / "litellm.yaml"
    path.write_text(yaml.safe_dump(sample))
    rt = load_config(path).runtime
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "k-secret")
    monkeypatch.setenv("REDIS_PASSWORD", "r-secret")
    assert resolve_secret(rt.kafka.sasl_plain_password) == "k-secret"
    assert resolve_secret(rt.redis.password) == "r-secret"


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=5) as r:
        return int(r.status)


@pytest.mark.integration
async def test_worker_serves_the_probe_paths(case: Case, kafka_bootstrap: str, redis_url: str) -> None:
    dep = one("Deployment", "coolant-worker")
    c = container(dep)
    args = c["args"][1:]
    keep: list[str] = []
    skip = {"--config", "--web-port", "--web-bind", "--data-dir", "--app-id"}  # the harness sets its own
    it = iter(args)
    for arg in it:
        if arg in skip:
            next(it)
        else:
            keep.append(arg)
    w = await case.worker("k8s", kafka_bootstrap, redis_url=redis_url, extra_args=tuple(keep))
    await w.wait_healthy()
    paths = [p["path"] for p in probes(c)] + [scrape_path(dep)]
    for path in paths:
        status, _ = await w.get(path)
        assert status == 200, f"GET {path} on the worker: {status}"


async def test_prober_serves_the_probe_paths() -> None:
    dep = one("Deployment", "coolant-prober")
    c = container(dep)
    port = free_port()
    runner = await ProbeMetrics().serve(port)
    try:
        paths = [p["path"] for p in probes(c)] + [scrape_path(dep)]
        for path in paths:
            assert await asyncio.to_thread(_get, f"http://127.0.0.1:{port}{path}") == 200, path
    finally:
        await runner.cleanup()
