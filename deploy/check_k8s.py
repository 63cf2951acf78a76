"""Checks of deploy/k8s that the Kubernetes schemas cannot make.

Validates every ScaledObject against KEDA's CRD schema (kept in
deploy/k8s/schemas/), strictly: an unknown field is an error, as it is
for `kubectl apply` with server-side field validation. Then checks what
must agree across files: the ScaledObject scales a Deployment that exists
and reads its connection from an env var that Deployment sets; KEDA's
target is the worker's --concurrency; each pod's grace period outlasts its
--shutdown-timeout; every Secret referenced is defined.

Usage: python3 deploy/check_k8s.py deploy/k8s
"""

import copy
import json
import pathlib
import sys

import jsonschema
import yaml


def strict(schema):
    """The schema with unknown properties refused wherever properties are listed."""
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


def flag(args, name):
    """The value following `name` in a container's args, or None."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def main(folder):
    folder = pathlib.Path(folder)
    docs = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    schema = json.loads((folder / "schemas" / "keda-scaledobject.json").read_text())
    validator = jsonschema.Draft7Validator(strict(schema))
    problems = []

    deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
    secrets = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Secret"}
    pod_specs = [
        (name, d["kind"], d["metadata"]["name"], d["spec"]["template"]["spec"])
        for name, d in docs
        if d["kind"] in ("Deployment", "Job")
    ]

    for file, doc in docs:
        if doc["kind"] != "ScaledObject":
            continue
        for error in validator.iter_errors(doc):
            where = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{file}: /{where}: {error.message}")
        target = deployments.get(doc["spec"]["scaleTargetRef"]["name"])
        if target is None:
            problems.append(f"{file}: scaleTargetRef names no Deployment in {folder}")
            continue
        container = target["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"] for e in container.get("env", [])}
        for trigger in doc["spec"]["triggers"]:
            meta = trigger["metadata"]
            if trigger["type"] == "postgresql":
                if meta.get("connectionFromEnv") not in env:
                    problems.append(f"{file}: connectionFromEnv is not set in the target's container")
                concurrency = flag(container.get("args", []), "--concurrency")
                if meta.get("targetQueryValue") != concurrency:
                    problems.append(
                        f"{file}: targetQueryValue {meta.get('targetQueryValue')!r} "
                        f"is not the worker's --concurrency {concurrency!r}"
                    )
                for state in ("'queued'", "'running'"):
                    if state not in meta.get("query", ""):
                        problems.append(f"{file}: the query does not count {state} tasks")

    for file, kind, name, spec in pod_specs:
        grace = spec.get("terminationGracePeriodSeconds", 30)
        for container in spec["containers"]:
            timeout = flag(container.get("args", []), "--shutdown-timeout")
            if timeout is not None and not grace > float(timeout):
                problems.append(
                    f"{file}: {kind} {name}: terminationGracePeriodSeconds {grace} "
                    f"must exceed --shutdown-timeout {timeout}"
                )
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["key"] not in secrets.get(ref["name"], {}).get("stringData", {}):
                    problems.append(f"{file}: {kind} {name}: secret {ref['name']}/{ref['key']} is not defined")

    for problem in problems:
        print(f"check_k8s: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_k8s: {len(docs)} resources in {folder} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "deploy/k8s"))
