#!/usr/bin/env python3
"""Checks deploy/: the Kubernetes manifests are valid objects, and everything they and the
Containerfiles pass to `tokenmill` matches what the binary accepts (no drift).

    python3 tests/deploy/deploy_test.py --tokenmill build/release/tokenmill

1. Renders every kustomization under deploy/kubernetes with `kubectl kustomize` (kubectl comes
   with the machine image; neither Debian nor PyPI has kustomize for it), each component (X/components/*)
   over its X/base too. Without kubectl the kustomizations' resource files are read as they are
   (each is a complete object) and the overlays are left out, which is said.
2. Validates every object, strictly (unknown fields are errors), against the Kubernetes JSON
   schemas of MIN_K8S and LATEST_K8S that the PyPI package kubernetes-validate ships (offline).
   Custom resources against tests/deploy/schemas (their CRDs' schemas, made strict the same way);
   an MPIJob's pod templates as core PodTemplates.
3. Every tokenmill invocation, in container args, `bash -c` scripts and the Containerfiles'
   ENTRYPOINT/CMD/RUN, uses only options of `tokenmill [SUBCOMMAND] --help`; every $(VAR) in a
   container's args is one of its env variables.
4. The numbers and names that must agree: containerPort, probes, Service, ServiceMonitor,
   NetworkPolicy and the Containerfiles' EXPOSE and HEALTHCHECK vs serve --port;
   terminationGracePeriodSeconds vs preStop + --shutdown-grace; the probes' paths; absolute
   paths given to tokenmill vs the container's volume mounts; the resume check vs train --out;
   mpirun -np vs the MPIJob's slots; the HPA's metric vs the prometheus-adapter rule, whose
   series exist in src/serve/server_metrics.cpp, and its target vs serve --max-running; base
   images pinned by digest; a non-root USER.
5. The Containerfiles' HEALTHCHECK command, run against a live `tokenmill serve` (on a test
   fixture), passes, and fails when nothing listens; /health and /ready answer 200.

Prints one line per failed check and 'N passed, N failed'; exits 1 on any failure.
"""

import argparse
import copy
import functools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import dockerfile
import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
CONTAINERFILES = [ROOT / "deploy" / "images" / f"Containerfile.{flavor}" for flavor in ("cpu", "cuda")]
SCHEMAS = Path(__file__).resolve().parent / "schemas"
MIN_K8S = "1.30.0"  # podFailurePolicy, autoscaling/v2, policy/v1: all GA or on by default
LATEST_K8S = kubernetes_validate.utils.latest_version()
CRD_SCHEMAS = {
    ("kubeflow.org/v2beta1", "MPIJob"): "mpijob-kubeflow.org-v2beta1.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring.coreos.com-v1.json",
}
SERVE_PROBE_PATHS = {"startupProbe": "/health", "livenessProbe": "/health", "readinessProbe": "/ready"}

sys.path.insert(0, str(ROOT / "tests" / "serve"))
from server_process import serve  # noqa: E402  (the serve tests' process helper)


class Checks:
    """Counts checks; a failed one is printed with where it failed."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, where, message):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {where}: {message}")
        return ok


# --- tokenmill's options, read from its --help ------------------------------------------------


class Cli:
    """The options of `tokenmill --help` and of each subcommand's --help."""

    _OPTION = re.compile(r"^\s{2}(-\S+)(.*)$")

    def __init__(self, binary):
        self.binary = binary
        self._subcommand_options = {}
        top = self._help([])
        self.subcommands = set(re.findall(r"^\s{2}(\w+)\s{2,}", top.split("Subcommands:")[1], re.M))
        self.globals = self._options(top.split("Subcommands:")[0])

    def _help(self, args):
        return subprocess.run([self.binary, *args, "--help"], capture_output=True, text=True, check=True).stdout

    @staticmethod
    def _options(text):
        """{'--port': (takes_value, default or None)}, every alias of each option."""
        options = {}
        for line in text.splitlines():
            m = Cli._OPTION.match(line)
            if not m:
                continue
            names = m.group(1).split(",")
            spec = re.split(r"\s{2,}", m.group(2).strip())[0]
            takes_value = bool(re.match(r"[A-Z]", spec))
            default = re.search(r"=(\S+)$", spec)
            for name in names:
                options[name] = (takes_value, default.group(1) if default else None)
        return options

    def options(self, subcommand):
        if subcommand not in self._subcommand_options:
            self._subcommand_options[subcommand] = self._options(self._help([subcommand]))
        return self._subcommand_options[subcommand]

    def parse(self, argv, where, checks=None):
        """(subcommand, {option: value}) of `tokenmill ARGV`; with `checks`, checks that each
        option exists (an unknown one is left out of the values either way)."""
        subcommand, values, i = None, {}, 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if subcommand is None and token in self.subcommands:
                subcommand = token
                continue
            if not re.match(r"^--?[A-Za-z]", token):
                continue
            name, eq, value = token.partition("=")
            known = self.options(subcommand) if subcommand else self.globals
            scope = f"tokenmill {subcommand} --help" if subcommand else "tokenmill --help"
            if name not in known:
                if checks is not None:
                    checks.check(False, where, f"{name} is not an option of {scope}")
                continue
            if checks is not None:
                checks.check(True, where, "")
            takes_value = known[name][0]
            if takes_value and not eq and i < len(argv):
                value = argv[i]
                i += 1
            values[name] = value if takes_value else True
        return subcommand, values

    def value(self, subcommand, values, option):
        """The option's value in `values`, else its default from --help."""
        if option in values:
            return values[option]
        return self.options(subcommand).get(option, (False, None))[1]


# --- rendering and schema validation --------------------------------------------------------


def kustomizations():
    """Directories under deploy/kubernetes with a Kustomization (not a Component)."""
    found = []
    for path in sorted(KUBERNETES.rglob("kustomization.yaml")):
        if yaml.safe_load(path.read_text()).get("kind", "Kustomization") == "Kustomization":
            found.append(path.parent)
    return found


def render(directory, kubectl):
    """The objects of a kustomization: kubectl kustomize's output, or without kubectl its own
    resource files (complete objects), None for an overlay (its base is rendered already)."""
    if kubectl:
        out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl kustomize {directory}: {out.stderr.strip()}")
        return [d for d in yaml.safe_load_all(out.stdout) if d]
    resources = yaml.safe_load((directory / "kustomization.yaml").read_text()).get("resources", [])
    if any((directory / r).is_dir() for r in resources):
        return None
    return [d for r in resources for d in yaml.safe_load_all((directory / r).read_text()) if d]


def render_components(kubectl):
    """{'X/components/C over X/base': objects} for every component (needs kubectl)."""
    rendered = {}
    for component in sorted(KUBERNETES.glob("*/components/*")):
        base = component.parent.parent / "base"
        with tempfile.TemporaryDirectory() as tmp:
            # kustomize takes relative paths only.
            Path(tmp, "kustomization.yaml").write_text(
                yaml.safe_dump(
                    {"resources": [os.path.relpath(base, tmp)], "components": [os.path.relpath(component, tmp)]}
                )
            )
            rendered[f"{component.relative_to(ROOT)} over {base.relative_to(ROOT)}"] = render(Path(tmp), kubectl)
    return rendered


def strict(schema):
    """The schema with additionalProperties: false wherever properties are listed and nothing
    else is said, as the API server's strict field validation treats unknown fields."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@functools.cache
def crd_schema(file_name):
    return strict(json.loads((SCHEMAS / file_name).read_text()))


def validate(obj, where, checks):
    """Validates obj against its schema in each Kubernetes version checked."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key in CRD_SCHEMAS:
        errors = sorted(jsonschema.Draft7Validator(crd_schema(CRD_SCHEMAS[key])).iter_errors(obj), key=str)
        checks.check(not errors, where, "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors))
        if obj["kind"] == "MPIJob":
            for role, replica in obj["spec"]["mpiReplicaSpecs"].items():
                template = {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {"name": role},
                    "template": replica["template"],
                }
                validate(template, f"{where} {role} template", checks)
        return
    for version in (MIN_K8S, LATEST_K8S):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
            checks.check(True, where, "")
        except kubernetes_validate.SchemaNotFoundError as e:
            checks.check(False, where, f"{e.message}: add its CRD's schema to tests/deploy/schemas")
        except kubernetes_validate.ValidationError as e:
            checks.check(False, where, f"Kubernetes {version}: {list(e.absolute_path)}: {e.message}")


# --- what the manifests pass to tokenmill ----------------------------------------------------


LAUNCHERS = ("mpirun", "mpiexec", "srun")


def tokenmill_argvs(script):
    """The arguments of each simple command of a shell script that runs tokenmill: as its
    command word (after `exec` and VAR=value words), or under an MPI launcher."""
    argvs = []
    for command in re.split(r";|&&|\|\||\||\n", script):
        words = shlex.split(command)
        while words and (words[0] == "exec" or re.match(r"^\w+=", words[0])):
            words = words[1:]
        if not words:
            continue
        is_tokenmill = [w == "tokenmill" or w.endswith("/tokenmill") for w in words]
        if is_tokenmill[0]:
            argvs.append(words[1:])
        elif Path(words[0]).name in LAUNCHERS and any(is_tokenmill):
            argvs.append(words[is_tokenmill.index(True) + 1 :])
    return argvs


def container_invocations(container):
    """tokenmill's argument lists in a container: its args with the image's ENTRYPOINT
    (tokenmill) when it has no command, a `bash -c` / `sh -c` script, or a command naming it."""
    command, args = container.get("command"), container.get("args", [])
    if command is None:
        return [args] if container["image"].startswith("tokenmill") else []
    if Path(command[0]).name in ("bash", "sh") and "-c" in command:
        script = (command + args)[command.index("-c") + 1]
        return tokenmill_argvs(script)
    return tokenmill_argvs(shlex.join(command + args))


def pod_specs(obj):
    """(name, pod spec) of every pod template in a workload."""
    if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        return [(obj["metadata"]["name"], obj["spec"]["template"]["spec"])]
    if obj["kind"] == "MPIJob":
        return [
            (f"{obj['metadata']['name']} {role}", r["template"]["spec"])
            for role, r in obj["spec"]["mpiReplicaSpecs"].items()
        ]
    return []


def port_number(container, port):
    """A probe's or Service's port (a name or a number) as the container's port number."""
    for p in container.get("ports", []):
        if port in (p.get("name"), p["containerPort"]):
            return p["containerPort"]
    return None


def pod_selector(obj):
    """The pod labels a Service, PodDisruptionBudget or NetworkPolicy selects; None for others."""
    if obj["kind"] == "Service":
        return obj["spec"]["selector"]
    if obj["kind"] == "PodDisruptionBudget":
        return obj["spec"]["selector"]["matchLabels"]
    if obj["kind"] == "NetworkPolicy":
        return obj["spec"]["podSelector"]["matchLabels"]
    return None


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def check_container(cli, where, pod, container, checks):
    """Options, env variables, serve's port/probes/grace and paths of one container."""
    env = {e["name"] for e in container.get("env", [])}
    for word in container.get("command", []) + container.get("args", []):
        for var in re.findall(r"\$\((\w+)\)", word):
            checks.check(var in env, where, f"$({var}) is not an env variable of the container")
    mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
    for argv in container_invocations(container):
        subcommand, values = cli.parse(argv, where, checks)
        for option, value in values.items():
            if isinstance(value, str) and value.startswith("/"):
                checks.check(
                    any(value == m or value.startswith(m.rstrip("/") + "/") for m in mounts),
                    where,
                    f"{option} {value} is on no volume mount of the container ({mounts})",
                )
        if subcommand == "serve":
            check_serve(cli, pod, container, values, where, checks)
        if subcommand == "train":
            check_train_resume(container, values, where, checks)


def check_serve(cli, pod, container, values, where, checks):
    port = int(cli.value("serve", values, "--port"))
    checks.check(
        cli.value("serve", values, "--host") == "0.0.0.0",
        where,
        "serve --host must be 0.0.0.0 in a pod (the default listens on loopback only)",
    )
    checks.check(port_number(container, port) == port, where, f"no containerPort {port} (serve --port)")
    for probe, path in SERVE_PROBE_PATHS.items():
        get = container.get(probe, {}).get("httpGet")
        if checks.check(get is not None, where, f"no {probe} httpGet"):
            checks.check(
                port_number(container, get["port"]) == port,
                where,
                f"{probe} port {get['port']} is not serve's port {port}",
            )
            checks.check(get["path"] == path, where, f"{probe} asks {get['path']}, not {path}")
    pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    sleep = int(pre_stop[1]) if len(pre_stop) == 2 and pre_stop[0] == "sleep" else 0
    grace = int(cli.value("serve", values, "--shutdown-grace"))
    period = pod.get("terminationGracePeriodSeconds", 30)
    checks.check(sleep > 0, where, "no preStop sleep: a rolling update would send requests to a stopping pod")
    checks.check(
        period >= sleep + grace,
        where,
        f"terminationGracePeriodSeconds {period} < preStop {sleep} s + --shutdown-grace {grace} s",
    )


def check_train_resume(container, values, where, checks):
    """The script's check for a checkpoint must look in train --out."""
    script = " ".join(container.get("command", []) + container.get("args", []))
    if "--resume" in values or "$resume" in script:
        found = re.findall(r'"([^"]+)/checkpoints/step_\*\.tmckpt"', script)
        checks.check(
            found == [values.get("--out")],
            where,
            f"the resume check looks in {found}, train --out is {values.get('--out')}",
        )


def check_objects(cli, name, objects, adapter_metrics, checks):
    """Schema validation and the cross-object checks of one rendering."""
    for obj in objects:
        validate(obj, f"{name}: {obj['kind']} {obj['metadata']['name']}", checks)
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    services = [o for o in objects if o["kind"] == "Service"]
    for obj in objects:
        where = f"{name}: {obj['kind']} {obj['metadata']['name']}"
        for pod_name, pod in pod_specs(obj):
            for container in pod.get("initContainers", []) + pod["containers"]:
                check_container(
                    cli, f"{name}: {obj['kind']} {pod_name} container {container['name']}", pod, container, checks
                )
        if obj["kind"] == "MPIJob":
            spec = obj["spec"]
            slots = spec["mpiReplicaSpecs"]["Worker"]["replicas"] * spec.get("slotsPerWorker", 1)
            script = " ".join(spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"])
            np = re.search(r"mpirun\s.*?-np\s+(\d+)", script)
            checks.check(
                np is not None and int(np.group(1)) == slots,
                where,
                f"mpirun -np {np and np.group(1)} is not Worker replicas x slotsPerWorker = {slots}",
            )
        selector = pod_selector(obj)
        containers = []
        if selector is not None:
            selected = [
                d for d in deployments.values() if selects(selector, d["spec"]["template"]["metadata"]["labels"])
            ]
            checks.check(bool(selected), where, "selects no Deployment's pods")
            containers = [c for d in selected for c in d["spec"]["template"]["spec"]["containers"]]
        if obj["kind"] == "Service":
            for p in obj["spec"]["ports"]:
                checks.check(
                    any(port_number(c, p["targetPort"]) for c in containers),
                    where,
                    f"targetPort {p['targetPort']} is no container port of the selected pods",
                )
        if obj["kind"] == "NetworkPolicy":
            for rule in obj["spec"].get("ingress", []):
                for p in rule.get("ports", []):
                    checks.check(
                        any(port_number(c, p["port"]) for c in containers),
                        where,
                        f"port {p['port']} is no container port of the selected pods",
                    )
        if obj["kind"] == "ServiceMonitor":
            ports = {
                p.get("name")
                for s in services
                if selects(obj["spec"]["selector"]["matchLabels"], s["metadata"].get("labels", {}))
                for p in s["spec"]["ports"]
            }
            for endpoint in obj["spec"]["endpoints"]:
                checks.check(endpoint["port"] in ports, where, f"port {endpoint['port']} is no port of its Services")
        if obj["kind"] == "HorizontalPodAutoscaler":
            check_hpa(cli, obj, deployments, adapter_metrics, where, checks)


def check_hpa(cli, hpa, deployments, adapter_metrics, where, checks):
    target = deployments.get(hpa["spec"]["scaleTargetRef"]["name"])
    if not checks.check(target is not None, where, "its scaleTargetRef is no Deployment of the rendering"):
        return
    container = target["spec"]["template"]["spec"]["containers"][0]
    serve_values = [
        values
        for argv in container_invocations(container)
        for sub, values in [cli.parse(argv, where)]
        if sub == "serve"
    ]
    max_running = int(cli.value("serve", serve_values[0] if serve_values else {}, "--max-running"))
    for metric in hpa["spec"]["metrics"]:
        if metric["type"] != "Pods":
            continue
        name = metric["pods"]["metric"]["name"]
        checks.check(name in adapter_metrics, where, f"metric {name} is served by no prometheus-adapter rule")
        value = float(metric["pods"]["target"]["averageValue"])
        checks.check(
            0 < value < max_running,
            where,
            f"target {value} requests in flight is not below serve --max-running {max_running}",
        )


def adapter_rules(objects, checks):
    """{metric name the adapter serves} from its ConfigMap; checks the series it reads exist."""
    served = set()
    metrics_source = (ROOT / "src" / "serve" / "server_metrics.cpp").read_text()
    for obj in objects:
        if obj["kind"] != "ConfigMap" or "config.yaml" not in obj.get("data", {}):
            continue
        for rule in yaml.safe_load(obj["data"]["config.yaml"])["rules"]:
            served.add(rule["name"]["as"])
            for series in set(re.findall(r"tokenmill_\w+", rule["seriesQuery"] + rule["metricsQuery"])):
                checks.check(
                    f'"{series}"' in metrics_source,
                    f"prometheus-adapter rule {rule['name']['as']}",
                    f"{series} is not a metric of src/serve/server_metrics.cpp",
                )
    return served


# --- Containerfiles --------------------------------------------------------------------------


def check_containerfile(cli, path, checks):
    where = path.relative_to(ROOT)
    instructions = dockerfile.parse_file(str(path))
    for i in instructions:
        if i.cmd == "ARG" and re.match(r"\w*IMAGE=", i.value[0]):
            checks.check(
                re.search(r"@sha256:[0-9a-f]{64}$", i.value[0]) is not None,
                where,
                f"{i.value[0]} is not pinned by digest",
            )
    # One stage's instructions at a time; the last stage is what a plain build gives.
    stages, stage = [], None
    for i in instructions:
        if i.cmd == "FROM":
            stage = {"name": i.value[-1], "parent": i.value[0], "instructions": []}
            stages.append(stage)
        elif stage:
            stage["instructions"].append(i)
    by_name = {s["name"]: s for s in stages}

    def inherited(stage, cmd):
        """The stage's last `cmd` instruction, or its parent stage's."""
        own = [i for i in stage["instructions"] if i.cmd == cmd]
        if own:
            return own[-1]
        parent = by_name.get(stage["parent"])
        return inherited(parent, cmd) if parent else None

    for s in stages:
        for i in s["instructions"]:
            if i.cmd == "RUN":
                for argv in tokenmill_argvs(i.value[0]):
                    cli.parse(argv, f"{where} RUN", checks)
        entrypoint, cmd = inherited(s, "ENTRYPOINT"), inherited(s, "CMD")
        if entrypoint is None:
            continue
        here = f"{where} stage {s['name']}"
        user = inherited(s, "USER")
        checks.check(
            user is not None and not user.value[0].startswith(("0", "root")),
            here,
            "the image must run as a non-root user (USER)",
        )
        checks.check(list(entrypoint.value) == ["tokenmill"], here, 'ENTRYPOINT must be ["tokenmill"]')
        subcommand, values = cli.parse(list(cmd.value), f"{here} CMD", checks)
        healthcheck = inherited(s, "HEALTHCHECK")
        if subcommand != "serve":
            continue
        port = cli.value("serve", values, "--port")
        exposed = {
            p
            for e in s["instructions"] + by_name.get(s["parent"], {"instructions": []})["instructions"]
            if e.cmd == "EXPOSE"
            for p in e.value
        }
        checks.check(port in exposed, here, f"serve --port {port} is not EXPOSEd ({exposed})")
        checks.check(cli.value("serve", values, "--host") == "0.0.0.0", here, "CMD must serve on --host 0.0.0.0")
        script = healthcheck.value[-1] if healthcheck and healthcheck.value[0] == "CMD" else ""
        checks.check(
            f"/dev/tcp/127.0.0.1/{port} " in script and "GET /health " in script,
            here,
            f"HEALTHCHECK must ask /health on port {port}",
        )


def healthcheck_script(path):
    """The HEALTHCHECK CMD's bash script of a Containerfile."""
    for i in dockerfile.parse_file(str(path)):
        if i.cmd == "HEALTHCHECK" and i.value[0] == "CMD":
            assert list(i.value[1:3]) == ["bash", "-c"], i.value
            return i.value[3]
    raise AssertionError(f"{path}: no HEALTHCHECK CMD")


def check_health_live(binary, checks):
    """Each HEALTHCHECK, pointed at a live server, passes; at a closed port, fails."""
    fixture = ROOT / "tests" / "fixtures" / "gguf" / "llama_q4_1.gguf"
    with serve(binary, str(fixture)) as server:
        host, port = server.host_port()
        for route in ("/health", "/ready"):
            status, _ = server.get(route)
            checks.check(status == 200, f"serve {route}", f"answered {status}")
        for path in CONTAINERFILES:
            script = healthcheck_script(path).replace("/127.0.0.1/8000", f"/{host}/{port}")
            run = subprocess.run(["bash", "-c", script], capture_output=True, timeout=10)
            checks.check(
                run.returncode == 0,
                f"{path.relative_to(ROOT)} HEALTHCHECK",
                f"failed against a live server: {run.stderr.decode()}",
            )
    with socket.socket() as s:  # a port nobody listens on: bound here, not listening
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
        for path in CONTAINERFILES:
            script = healthcheck_script(path).replace("/127.0.0.1/8000", f"/127.0.0.1/{closed}")
            run = subprocess.run(["bash", "-c", script], capture_output=True, timeout=10)
            checks.check(run.returncode != 0, f"{path.relative_to(ROOT)} HEALTHCHECK", "passed with no server")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenmill", required=True, help="the tokenmill binary")
    args = parser.parse_args()
    cli = Cli(args.tokenmill)
    checks = Checks()

    kubectl = shutil.which("kubectl")
    rendered = {str(d.relative_to(ROOT)): render(d, kubectl) for d in kustomizations()}
    if kubectl:
        rendered.update(render_components(kubectl))
    else:
        print(
            "note: kubectl not found, so the kustomizations' own files are validated as they are "
            f"and the overlays and components are not rendered: {[k for k, v in rendered.items() if v is None]}"
        )
    rendered = {k: v for k, v in rendered.items() if v is not None}
    adapter_metrics = adapter_rules([o for objects in rendered.values() for o in objects], checks)
    for name, objects in rendered.items():
        check_objects(cli, name, objects, adapter_metrics, checks)
    for path in CONTAINERFILES:
        check_containerfile(cli, path, checks)
    check_health_live(args.tokenmill, checks)

    print(f"{checks.passed} passed, {checks.failed} failed")
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
