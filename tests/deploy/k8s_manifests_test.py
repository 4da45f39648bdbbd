#!/usr/bin/env python3
"""Renders deploy/k8s (the base and every overlay) and checks the objects.

- Every built-in object validates against the Kubernetes OpenAPI schemas (kubernetes-validate,
  strict: unknown fields fail) for the oldest version we support and the newest it knows.
  PodMonitor (a CRD) is checked structurally here.
- The Deployment: probes are native gRPC probes on the declared grpc container port;
  terminationGracePeriodSeconds > --drain-timeout-s + the preStop sleep; every container arg
  is a flag that server/main.cc defines, given once, with a value of the flag's type;
  --max-connection-age-s > 0; the security context; an emptyDir at /tmp; no `command`, so the
  image's ENTRYPOINT (rtgen-server --model=...) stays.
- Services, PDB, PodMonitor select the pods and name declared ports; one Service is headless.
- HPA: a Pods metric rtgen_requests_waiting (AverageValue) that the prometheus-adapter rule
  serves, targeting the Deployment.
- Overlays: gpu has --backend=cuda and nvidia.com/gpu 1 and an HPA; cpu has --backend=cpu,
  1 replica, no HPA; nvidia.com/gpu appears nowhere else.
Finally, a few mutated copies of a rendered overlay must be rejected (the checks can fail).

Needs kubectl (with kustomize v4+, i.e. kubectl >= 1.21) or a standalone kustomize, and the
PyPI package kubernetes-validate (installed with pip when missing).
"""
import copy
import importlib
import os
import re
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S = os.path.join(ROOT, "deploy", "k8s")
TARGETS = ["base", "overlays/gpu", "overlays/cpu"]
# Oldest Kubernetes we support (gRPC probes are GA since 1.27) and the newest schema known.
MIN_KUBERNETES = "1.28.0"
GPU = "nvidia.com/gpu"
HPA_METRIC = "rtgen_requests_waiting"


def fail_setup(message):
    print("SETUP ERROR: " + message, file=sys.stderr)
    sys.exit(1)


def import_kubernetes_validate():
    try:
        return importlib.import_module("kubernetes_validate")
    except ImportError:
        print("installing kubernetes-validate with pip", file=sys.stderr)
        result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                                 "kubernetes-validate"], capture_output=True, text=True)
        if result.returncode != 0:
            fail_setup("kubernetes-validate is missing and `pip install kubernetes-validate` "
                       "failed:\n" + result.stderr)
        importlib.invalidate_caches()
        return importlib.import_module("kubernetes_validate")


def kustomize_command():
    kubectl = shutil.which("kubectl")
    if kubectl:
        return [kubectl, "kustomize"]
    kustomize = shutil.which("kustomize")
    if kustomize:
        return [kustomize, "build"]
    # Neither is a Debian package of a usable version: a machine without them cannot run this
    # check, which is then skipped (ctest SKIP_RETURN_CODE 77), saying why, not passed.
    print("SKIPPED: neither kubectl nor kustomize is installed. Install kubectl >= 1.21 (it "
          "embeds kustomize v4+) or a standalone kustomize v5. Debian 12's kubernetes-client "
          "(kubectl 1.20) embeds kustomize v2.0.3, which cannot read these kustomizations "
          "(directories in `resources`, `labels`, `patches`).", file=sys.stderr)
    sys.exit(77)


def render(target):
    command = kustomize_command() + [os.path.join(K8S, target)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        fail_setup(f"`{' '.join(command)}` failed:\n{result.stderr}\nIf this kubectl is older "
                   "than 1.21 (kustomize v2/v3, e.g. Debian's kubernetes-client), install a "
                   "newer kubectl or kustomize v5.")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def server_flags():
    """{flag_name: type} from the ABSL_FLAG definitions in server/main.cc."""
    with open(os.path.join(ROOT, "server", "main.cc")) as f:
        source = f.read()
    flags = dict((name, kind) for kind, name in
                 re.findall(r"ABSL_FLAG\(\s*([\w:]+)\s*,\s*(\w+)\s*,", source))
    if not flags:
        fail_setup("found no ABSL_FLAG in server/main.cc")
    return flags


def parse_args(args, flags, errors):
    """--flag=value list → {flag: value}; reports unknown, repeated and mistyped flags."""
    values = {}
    for arg in args:
        match = re.fullmatch(r"--([\w-]+)(?:=(.*))?", arg)
        if not match:
            errors.append(f"container arg {arg!r} is not --flag=value")
            continue
        name, value = match.group(1).replace("-", "_"), match.group(2)
        if name not in flags:
            errors.append(f"container arg {arg!r}: server/main.cc defines no flag {name}")
            continue
        if name in values:
            errors.append(f"flag --{name} given twice")
        kind = flags[name]
        if value is None:
            if kind != "bool":
                errors.append(f"flag --{name} has no value (write --flag=value)")
            value = "true"
        elif kind.startswith(("int", "uint")) and not re.fullmatch(r"-?\d+", value):
            errors.append(f"flag --{name}={value}: not an integer")
        elif kind == "bool" and value not in ("true", "false"):
            errors.append(f"flag --{name}={value}: not true/false")
        values[name] = value
    return values


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_podmonitor(obj, pod_labels, port_names, errors):
    where = f"PodMonitor {obj.get('metadata', {}).get('name')}"
    if obj.get("apiVersion") != "monitoring.coreos.com/v1":
        errors.append(f"{where}: apiVersion must be monitoring.coreos.com/v1")
    spec = obj.get("spec") or {}
    unknown = set(spec) - {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel",
                           "podTargetLabels", "sampleLimit"}
    if unknown:
        errors.append(f"{where}: unknown spec fields {sorted(unknown)}")
    if not selects((spec.get("selector") or {}).get("matchLabels"), pod_labels):
        errors.append(f"{where}: spec.selector.matchLabels does not select the rtgen pods")
    endpoints = spec.get("podMetricsEndpoints") or []
    if not endpoints:
        errors.append(f"{where}: no podMetricsEndpoints")
    for endpoint in endpoints:
        unknown = set(endpoint) - {"port", "path", "interval", "scrapeTimeout", "scheme",
                                   "honorLabels", "relabelings", "metricRelabelings"}
        if unknown:
            errors.append(f"{where}: unknown endpoint fields {sorted(unknown)}")
        if endpoint.get("port") != "metrics" or "metrics" not in port_names:
            errors.append(f"{where}: endpoint port {endpoint.get('port')!r} is not the "
                          "container's metrics port")
        if endpoint.get("path", "/metrics") != "/metrics":
            errors.append(f"{where}: path {endpoint.get('path')} is not /metrics")
        for key in ("interval", "scrapeTimeout"):
            if key in endpoint and not re.fullmatch(r"\d+(ms|s|m)", str(endpoint[key])):
                errors.append(f"{where}: {key} {endpoint[key]!r} is not a duration")


def adapter_metric_names(errors):
    """Metric names the prometheus-adapter rule file serves to the custom metrics API."""
    path = os.path.join(K8S, "base", "prometheus-adapter-rules.yaml")
    with open(path) as f:
        config = yaml.safe_load(f)
    names = set()
    for rule in ((config or {}).get("rules") or {}).get("custom") or []:
        series = re.match(r"\s*([a-zA-Z_:][\w:]*)", rule.get("seriesQuery", ""))
        served = (rule.get("name") or {}).get("as") or (series.group(1) if series else None)
        overrides = (rule.get("resources") or {}).get("overrides") or {}
        if {"namespace", "pod"} - set(overrides):
            errors.append(f"{path}: rule for {served} does not map namespace and pod")
        if "<<.Series>>" not in rule.get("metricsQuery", ""):
            errors.append(f"{path}: rule for {served} has no metricsQuery over <<.Series>>")
        if served:
            names.add(served)
    return names


def check_deployment(dep, flags, errors):
    """Checks one Deployment; returns (pod labels, container port names, parsed flag values)."""
    name = dep["metadata"]["name"]
    pod = dep["spec"]["template"]
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if not selects(dep["spec"]["selector"].get("matchLabels"), labels):
        errors.append(f"Deployment {name}: selector does not match its pod labels")
    spec = pod["spec"]
    containers = spec["containers"]
    if [c["name"] for c in containers] != ["rtgen"]:
        errors.append(f"Deployment {name}: expected one container named rtgen")
    c = containers[0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if ports.get("grpc") != 50051 or ports.get("metrics") != 9090:
        errors.append(f"Deployment {name}: container ports must be grpc 50051, metrics 9090: {ports}")
    for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
        probe = c.get(probe_name)
        if not probe or "grpc" not in probe:
            errors.append(f"Deployment {name}: {probe_name} is not a native gRPC probe")
        elif probe["grpc"].get("port") not in ports.values() or probe["grpc"]["port"] != ports.get("grpc"):
            errors.append(f"Deployment {name}: {probe_name} port {probe['grpc'].get('port')} is "
                          "not the declared grpc container port")
    if "command" in c:
        errors.append(f"Deployment {name}: `command` would replace the image ENTRYPOINT (--model)")
    values = parse_args(c.get("args", []), flags, errors)

    drain = int(values.get("drain_timeout_s", 0) or 0)
    if "drain_timeout_s" not in values:
        errors.append(f"Deployment {name}: no --drain-timeout-s (keep it below the grace period)")
    pre_stop = ((c.get("lifecycle") or {}).get("preStop") or {})
    sleep = 0
    if "exec" in pre_stop:
        command = pre_stop["exec"].get("command", [])
        if command[:1] == ["sleep"] and len(command) == 2:
            sleep = int(command[1])
    elif "sleep" in pre_stop:
        sleep = int(pre_stop["sleep"].get("seconds", 0))
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if not grace > drain + sleep:
        errors.append(f"Deployment {name}: terminationGracePeriodSeconds {grace} is not more than "
                      f"--drain-timeout-s {drain} + preStop sleep {sleep}")
    if int(values.get("max_connection_age_s", 0) or 0) <= 0:
        errors.append(f"Deployment {name}: --max-connection-age-s must be > 0 (rebalancing)")

    pod_sc = spec.get("securityContext") or {}
    sc = c.get("securityContext") or {}
    if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
        errors.append(f"Deployment {name}: runAsNonRoot is not set")
    if int(sc.get("runAsUser", pod_sc.get("runAsUser", 1)) or 0) == 0:
        errors.append(f"Deployment {name}: runs as uid 0")
    if sc.get("readOnlyRootFilesystem") is not True:
        errors.append(f"Deployment {name}: readOnlyRootFilesystem is not true")
    if sc.get("allowPrivilegeEscalation") is not False:
        errors.append(f"Deployment {name}: allowPrivilegeEscalation is not false")
    if (sc.get("capabilities") or {}).get("drop") != ["ALL"]:
        errors.append(f"Deployment {name}: capabilities.drop is not [ALL]")
    empty_dirs = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    if not any(m["mountPath"] == "/tmp" and m["name"] in empty_dirs
               for m in c.get("volumeMounts", [])):
        errors.append(f"Deployment {name}: no emptyDir mounted at /tmp")
    return labels, ports, values, c.get("resources") or {}


def check_target(target, objects, kv, versions, flags, adapter_metrics, errors):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    deployments = by_kind.get("Deployment", [])
    if len(deployments) != 1:
        errors.append(f"expected one Deployment, found {len(deployments)}")
        return
    dep = deployments[0]
    labels, ports, values, resources = check_deployment(dep, flags, errors)

    for obj in objects:
        where = f"{obj['kind']} {obj['metadata'].get('name')}"
        if obj["kind"] == "PodMonitor":
            check_podmonitor(obj, labels, ports, errors)
            continue
        if "." in obj["apiVersion"].split("/")[0] and not obj["apiVersion"].startswith(
                ("apps/", "autoscaling/", "policy/", "batch/", "networking.k8s.io/")):
            errors.append(f"{where}: custom resource {obj['apiVersion']} has no check")
            continue
        for version in versions:
            try:
                kv.validate(obj, version, strict=True)
            except kv.ValidationError as e:
                errors.append(f"{where}: invalid for Kubernetes {version}: {e.message} "
                              f"at {'.'.join(str(p) for p in e.path)}")
            except Exception as e:  # SchemaNotFoundError, InvalidSchemaError
                errors.append(f"{where}: cannot validate for Kubernetes {version}: {e}")
        namespace = obj["metadata"].get("namespace")
        if namespace != dep["metadata"].get("namespace"):
            errors.append(f"{where}: namespace {namespace} differs from the Deployment's")

    services = by_kind.get("Service", [])
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    cluster_ip = [s for s in services if s["spec"].get("clusterIP") != "None" and
                  s["spec"].get("type", "ClusterIP") == "ClusterIP"]
    if len(headless) != 1 or len(cluster_ip) != 1:
        errors.append("expected one ClusterIP and one headless (clusterIP: None) Service")
    for svc in services:
        if not selects(svc["spec"].get("selector"), labels):
            errors.append(f"Service {svc['metadata']['name']}: selector misses the rtgen pods")
        for port in svc["spec"]["ports"]:
            target_port = port.get("targetPort", port["port"])
            if target_port not in ports and target_port not in ports.values():
                errors.append(f"Service {svc['metadata']['name']}: targetPort {target_port} is "
                              "not a container port")
        if "grpc" not in [p.get("targetPort") for p in svc["spec"]["ports"]]:
            errors.append(f"Service {svc['metadata']['name']}: no port to grpc")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        if not selects(pdb["spec"]["selector"].get("matchLabels"), labels):
            errors.append("PodDisruptionBudget: selector misses the rtgen pods")
    if len(by_kind.get("PodDisruptionBudget", [])) != 1:
        errors.append("expected one PodDisruptionBudget")
    if len(by_kind.get("PodMonitor", [])) != 1:
        errors.append("expected one PodMonitor")

    hpas = by_kind.get("HorizontalPodAutoscaler", [])
    for hpa in hpas:
        ref = hpa["spec"]["scaleTargetRef"]
        if (ref.get("kind"), ref.get("name")) != ("Deployment", dep["metadata"]["name"]):
            errors.append(f"HPA: scaleTargetRef {ref} is not the Deployment")
        if hpa["spec"].get("minReplicas", 1) > hpa["spec"]["maxReplicas"]:
            errors.append("HPA: minReplicas > maxReplicas")
        pods_metrics = [m["pods"] for m in hpa["spec"].get("metrics", []) if m["type"] == "Pods"]
        if not any(m["metric"]["name"] == HPA_METRIC and m["target"]["type"] == "AverageValue"
                   for m in pods_metrics):
            errors.append(f"HPA: no Pods metric {HPA_METRIC} with an AverageValue target")
        for m in pods_metrics:
            if m["metric"]["name"] not in adapter_metrics:
                errors.append(f"HPA: metric {m['metric']['name']} is not served by the "
                              "prometheus-adapter rules")
        if "replicas" in dep["spec"]:
            errors.append("Deployment sets replicas although an HPA owns the count")

    backend = values.get("backend")
    gpu_limit = (resources.get("limits") or {}).get(GPU)
    rendered = yaml.safe_dump_all(objects)
    if target == "overlays/gpu":
        if backend != "cuda":
            errors.append(f"gpu overlay: --backend is {backend}, not cuda")
        if str(gpu_limit) != "1":
            errors.append(f"gpu overlay: limits.{GPU} is {gpu_limit}, not 1")
        if len(hpas) != 1:
            errors.append("gpu overlay: expected one HPA")
        pod_spec = dep["spec"]["template"]["spec"]
        # The GPU request places the pod; a required node label (GPU Feature Discovery's) would
        # leave it Pending on GPU pools that lack the label.
        if pod_spec.get("nodeSelector") or pod_spec.get("affinity", {}).get(
                "nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            errors.append("gpu overlay: a required node label (the GPU request places the pod)")
        if not any(t.get("key") == GPU for t in pod_spec.get("tolerations", [])):
            errors.append(f"gpu overlay: no toleration for {GPU}")
        # A full GPU pool has no GPU for a surge pod: the rollout would stall.
        rolling = dep["spec"].get("strategy", {}).get("rollingUpdate", {})
        if str(rolling.get("maxSurge", "25%")) not in ("0", "0%"):
            errors.append(f"gpu overlay: maxSurge {rolling.get('maxSurge', '25%')}, not 0")
    else:
        if GPU in rendered:
            errors.append(f"{target}: mentions {GPU} (only the gpu overlay may)")
    if target == "overlays/cpu":
        if backend != "cpu":
            errors.append(f"cpu overlay: --backend is {backend}, not cpu")
        if dep["spec"].get("replicas") != 1:
            errors.append("cpu overlay: replicas is not 1")
        if hpas:
            errors.append("cpu overlay: has an HPA (it runs one replica)")
    if target == "base" and backend is not None:
        errors.append("base: sets --backend (overlays choose it)")


def check_dockerfile_entrypoint(errors):
    with open(os.path.join(ROOT, "docker", "Dockerfile")) as f:
        entry = [l for l in f if l.startswith("ENTRYPOINT")]
    if not entry or "rtgen-server" not in entry[-1] or "--model" not in entry[-1]:
        errors.append("docker/Dockerfile: ENTRYPOINT must be rtgen-server with --model "
                      "(the manifests pass args only)")


def main():
    kv = import_kubernetes_validate()
    versions = [MIN_KUBERNETES, kv.latest_version()]
    flags = server_flags()
    failures = 0
    rendered = {}
    for target in TARGETS:
        errors = []
        adapter_metrics = adapter_metric_names(errors)
        rendered[target] = render(target)
        check_target(target, rendered[target], kv, versions, flags, adapter_metrics, errors)
        if target == "base":
            check_dockerfile_entrypoint(errors)
        kinds = sorted(o["kind"] for o in rendered[target])
        print(f"{target}: {len(rendered[target])} objects ({', '.join(kinds)}), "
              f"schemas {', '.join(versions)}: {'ok' if not errors else 'FAIL'}")
        for e in errors:
            print(f"  {target}: {e}")
        failures += len(errors)

    # The checks must be able to fail: each mutation of the rendered gpu overlay breaks one rule.
    def container(objs):
        return next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]

    def pod_spec(objs):
        return next(o for o in objs if o["kind"] == "Deployment")["spec"]["template"]["spec"]

    mutations = {
        "probe on an undeclared port": lambda o: container(o)["readinessProbe"]["grpc"].update(port=8080),
        "grace period below the drain timeout": lambda o: pod_spec(o).update(terminationGracePeriodSeconds=30),
        "an unknown server flag": lambda o: container(o)["args"].append("--drain-timeout=30s"),
        "a field the schema lacks": lambda o: container(o).update(imagePullPolice="Always"),
        "root filesystem writable": lambda o: container(o)["securityContext"].update(readOnlyRootFilesystem=False),
        "PodMonitor on a wrong port": lambda o: next(x for x in o if x["kind"] == "PodMonitor")["spec"]["podMetricsEndpoints"][0].update(port="http"),
        "no GPU limit": lambda o: container(o)["resources"]["limits"].pop(GPU),
    }
    for description, mutate in mutations.items():
        objects = copy.deepcopy(rendered["overlays/gpu"])
        mutate(objects)
        errors = []
        check_target("overlays/gpu", objects, kv, versions[-1:], flags,
                     adapter_metric_names(errors), errors)
        if not errors:
            print(f"FAIL: the checks accepted a mutation: {description}")
            failures += 1
    print(f"{len(mutations)} mutations rejected" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
