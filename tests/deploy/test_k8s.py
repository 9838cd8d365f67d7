"""deploy/k8s: every overlay built by the real `kubectl kustomize`, its objects validated against the Kubernetes
schemas (kubernetes-validate, strict: unknown fields fail) and KEDA's vendored CRD schemas, then checked against
the queues and settings of the code."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from common.queue.names import cpu_worker_queues, gpu_worker_default_queues
from common.settings import Settings

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
OVERLAYS = ("base", "overlays/gpu", "overlays/keda", "overlays/external-services")
KUBERNETES_VERSION = "1.32.0"  # the oldest minor still supported upstream when this was written
KEDA_CRDS = K8S / "vendor" / "keda"


def kustomize(folder: Path) -> list[dict]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (CI has it): cannot build the Kustomize overlays")
    built = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


@cache
def built(overlay: str) -> tuple[dict, ...]:
    return tuple(kustomize(K8S / overlay))


@cache
def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the openAPIV3Schema of that served version, from the vendored CRDs."""
    schemas = {}
    for path in sorted(KEDA_CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            schemas[key] = version["schema"]["openAPIV3Schema"]
    return schemas


def validate(doc: dict) -> None:
    """Raises if `doc` breaks the schema of its kind (Kubernetes, or a vendored CRD)."""
    if doc["apiVersion"].startswith("keda.sh/"):
        schema = crd_schemas()[(doc["apiVersion"], doc["kind"])]
        jsonschema.validate(doc, schema)
        return
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def of_kind(docs, kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_builds_and_validates_against_the_schemas(overlay):
    docs = built(overlay)
    assert docs
    for doc in docs:
        validate(doc)  # raises with the object's path inside it


def test_validation_can_fail():
    """A misspelt field, a wrong type and a ScaledObject without its target each fail."""
    deployment = dict(of_kind(built("base"), "Deployment")["ocrq-api"])
    misspelt = deployment | {"spec": deployment["spec"] | {"replica": 2}}
    wrong_type = deployment | {"spec": deployment["spec"] | {"replicas": "two"}}
    scaled = of_kind(built("overlays/keda"), "ScaledObject")["ocrq-gpu-worker-bulk"]
    untargeted = scaled | {"spec": {k: v for k, v in scaled["spec"].items() if k != "scaleTargetRef"}}
    for broken in (misspelt, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError):
            validate(broken)
    with pytest.raises(jsonschema.ValidationError):
        validate(untargeted)


def worker_queues(deployment: dict) -> set[str]:
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    if "--queues" in args:
        return set(args[args.index("--queues") + 1].split(","))
    if "--gpu" in args:
        return set(gpu_worker_default_queues(args[args.index("--lane") + 1]))
    return set(cpu_worker_queues())


def test_keda_scales_each_worker_on_exactly_the_queues_it_reads_and_bulk_gpus_to_zero():
    docs = built("overlays/keda")
    deployments, scaled = of_kind(docs, "Deployment"), of_kind(docs, "ScaledObject")
    workers = {name for name in deployments if name != "ocrq-api"}
    assert {so["spec"]["scaleTargetRef"]["name"] for so in scaled.values()} == workers
    for so in scaled.values():
        target = deployments[so["spec"]["scaleTargetRef"]["name"]]
        lists = {t["metadata"]["listName"] for t in so["spec"]["triggers"] if t["type"] == "redis"}
        assert lists == worker_queues(target), target["metadata"]["name"]
        assert all(t["metadata"]["address"] == "redis.example.internal:6379" for t in so["spec"]["triggers"])
        assert "replicas" not in target["spec"], "KEDA owns the replica count"
    minimum = {so["spec"]["scaleTargetRef"]["name"]: so["spec"]["minReplicaCount"] for so in scaled.values()}
    assert minimum.pop("ocrq-gpu-worker-bulk") == 0
    assert all(count >= 1 for count in minimum.values()), minimum


def test_gpu_overlay_puts_an_engine_on_every_gpu_node_and_workers_beside_it():
    docs = built("overlays/gpu")
    (engine,) = of_kind(docs, "DaemonSet").values()
    container = engine["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"]
    assert of_kind(docs, "Service")["ocrq-engine"]["spec"]["internalTrafficPolicy"] == "Local"
    settings = of_kind(docs, "ConfigMap")["ocrq-settings"]["data"]
    assert settings["OCRQ_ENGINE"] == "vllm" and "ocrq-engine" in settings["OCRQ_ENGINE_URLS"]
    deployments = of_kind(docs, "Deployment")
    lanes = set()
    for name, deployment in deployments.items():
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        if "--gpu" in args:
            lanes.add(args[args.index("--lane") + 1])
            affinity = deployment["spec"]["template"]["spec"]["affinity"]["podAffinity"]
            (term,) = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
            assert term["topologyKey"] == "kubernetes.io/hostname", name
    assert lanes == {"bulk", "interactive"}
    # Every queue a GPU deployment reads has a consumer, and the CPU workers read no page queue.
    consumed = set().union(*(worker_queues(d) for d in deployments.values() if d["metadata"]["name"] != "ocrq-api"))
    assert set(gpu_worker_default_queues()) <= consumed
    assert not {q for q in worker_queues(deployments["ocrq-worker"]) if q.startswith("ocrq.pages.")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_settings_are_real_settings_and_every_pod_reads_them_probed_and_sized(overlay):
    docs = built(overlay)
    fields = {f"OCRQ_{name.upper()}" for name in Settings.model_fields}
    for kind in ("ConfigMap", "Secret"):
        for name, doc in of_kind(docs, kind).items():
            if name.startswith("ocrq-keda"):
                continue
            keys = set(doc.get("data") or {}) | set(doc.get("stringData") or {})
            assert keys and keys <= fields, (name, keys - fields)
    for kind in ("Deployment", "DaemonSet", "Job"):
        for name, doc in of_kind(docs, kind).items():
            for container in doc["spec"]["template"]["spec"]["containers"]:
                assert container["resources"]["requests"], name
                if kind != "Job":
                    assert container.get("livenessProbe"), name
                if kind == "Deployment" and "engine" not in container["args"]:
                    refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
                    assert refs == {"ocrq-settings", "ocrq-secrets"}, name
    api = of_kind(docs, "Deployment")["ocrq-api"]["spec"]["template"]["spec"]["containers"][0]
    probes = (api["livenessProbe"]["httpGet"]["path"], api["readinessProbe"]["httpGet"]["path"])
    assert probes == ("/healthz", "/readyz")
    budgets = {doc["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
               for doc in of_kind(docs, "PodDisruptionBudget").values()}
    assert {"ocrq-api", "ocrq-worker", "ocrq-webhook-worker"} <= budgets
