"""Checks of deploy/k8s that the Kubernetes schemas cannot make.

Validates every ScaledObject and TriggerAuthentication against KEDA's CRD
schemas (kept in deploy/k8s/schemas/), strictly: an unknown field is an
error, as it is for `kubectl apply` with server-side field validation.
Then checks what must agree across files:

- the ScaledObject scales a Deployment that exists, and its PostgreSQL
  trigger reads the URL through a TriggerAuthentication from a Secret key
  that exists; KEDA's target is the worker's --concurrency, and a worker's
  --threads and CPU match it;
- each pod's grace period outlasts its --shutdown-timeout; every Secret
  and ConfigMap a pod or a TriggerAuthentication names is defined;
- the CA file of the database URL (`sslrootcert=`) is mounted at that path
  in every pod that reads the URL, and in KEDA's operator
  (deploy/k8s/keda/values.yaml);
- each Ingress host is one its API Deployment answers to (--allowed-hosts)
  and is covered by the Ingress's TLS;
- the connection budget: the most PostgreSQL connections the manifests can
  open at once (KEDA's maxReplicaCount x the workers' pool, the API's
  replicas and rollout surge x its pool, KEDA, the Jobs) fits the
  managed server's limit below, and the table of it in deploy/README.md
  is the one computed here.

Usage: python3 deploy/check_k8s.py deploy/k8s
       python3 deploy/check_k8s.py --budget deploy/k8s   # prints the table
"""

import copy
import json
import math
import pathlib
import posixpath
import sys
import urllib.parse

import jsonschema
import yaml

# The managed PostgreSQL the manifests are sized for: its max_connections,
# and how many of them mcq leaves to others (the service's reserved and
# superuser connections, people's psql sessions, pg_dump, exporters).
MAX_CONNECTIONS = 100
KEPT_FREE = 20
# `--db-pool-size` when neither the flag nor MCQ_DB_POOL_SIZE is given
# (crates/mcq/src/cli/queue_flags.rs).
DEFAULT_POOL_SIZE = 16
# `mcq migrate`, `mcq keys …`, `mcq tenants …`: the start-up check holds
# two connections at once; migrating and the command's work use one each.
ONE_OFF_CONNECTIONS = 2
# KEDA's PostgreSQL scaler: one connection per query in flight (its poll,
# and a read the HPA asks for at the same moment).
KEDA_CONNECTIONS = 2
# KEDA's default when a ScaledObject gives no maxReplicaCount.
KEDA_DEFAULT_MAX_REPLICAS = 100

BUDGET_BEGIN = "<!-- connection-budget:begin (deploy/check_k8s.py --budget) -->"
BUDGET_END = "<!-- connection-budget:end -->"


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


def setting(container, name, env):
    """A flag's value, else its environment variable's literal value, else None."""
    value = flag(container.get("args", []), name)
    if value is not None:
        return value
    for entry in container.get("env", []):
        if entry["name"] == env and "value" in entry:
            return entry["value"]
    return None


def cpu_cores(quantity):
    """A Kubernetes CPU quantity ("4", "500m") in cores."""
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def surge(deployment, replicas):
    """Extra pods a rolling update may start above `replicas`."""
    strategy = deployment["spec"].get("strategy", {})
    if strategy.get("type") == "Recreate":
        return 0
    value = strategy.get("rollingUpdate", {}).get("maxSurge", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(replicas * int(value[:-1]) / 100)
    return int(value)


def database_url(secrets):
    """The DATABASE_URL of the mcq-database Secret, or None."""
    return secrets.get("mcq-database", {}).get("stringData", {}).get("DATABASE_URL")


def mounted(spec, container, path):
    """Whether `path` lies under one of the container's volume mounts."""
    for mount in container.get("volumeMounts", []):
        root = mount["mountPath"].rstrip("/")
        if path == root or path.startswith(root + "/"):
            return mount
    return None


def budget(docs):
    """Rows (who, how many, connections each, total) and the total at the server."""
    deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
    scaled = {}
    triggers = []
    for _, doc in docs:
        if doc["kind"] == "ScaledObject":
            target = doc["spec"]["scaleTargetRef"]["name"]
            scaled[target] = doc["spec"].get("maxReplicaCount", KEDA_DEFAULT_MAX_REPLICAS)
            for trigger in doc["spec"]["triggers"]:
                if trigger["type"] == "postgresql":
                    triggers.append(target)
    rows = []
    for name, deployment in deployments.items():
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        command = container.get("args", ["serve"])[0]
        if name in scaled:
            replicas = scaled[name]
            extra = surge(deployment, replicas)
            how = f"{replicas} (KEDA's maxReplicaCount)" if extra == 0 else f"{replicas} + {extra} (KEDA's maximum, rollout surge)"
        else:
            replicas = deployment["spec"].get("replicas", 1)
            extra = surge(deployment, replicas)
            how = f"{replicas} + {extra} (replicas, rollout surge)" if extra else f"{replicas} (replicas)"
        pool = setting(container, "--db-pool-size", "MCQ_DB_POOL_SIZE")
        each = int(pool) if pool is not None else DEFAULT_POOL_SIZE
        source = "`--db-pool-size`" if pool is not None else "the default pool"
        if setting(container, "--db-pool-mode", "MCQ_DB_POOL_MODE") == "transaction":
            # Its connections end at the pooler, whose own pool is budgeted there.
            continue
        rows.append((f"`{name}` (`mcq {command}`)", how, f"{each} ({source})", (replicas + extra) * each))
    for _, doc in docs:
        if doc["kind"] != "Job":
            continue
        container = doc["spec"]["template"]["spec"]["containers"][0]
        count = doc["spec"].get("parallelism", 1)
        rows.append(
            (f"`{doc['metadata']['name']}` (`mcq {container['args'][0]}`, a Job)", f"{count}", f"{ONE_OFF_CONNECTIONS}", count * ONE_OFF_CONNECTIONS)
        )
    for target in triggers:
        rows.append((f"KEDA's `postgresql` trigger for `{target}`", "1", f"{KEDA_CONNECTIONS}", KEDA_CONNECTIONS))
    return rows, sum(row[3] for row in rows)


def budget_table(rows, total):
    """The budget as the Markdown table deploy/README.md holds."""
    lines = [
        "| who | pods at most | connections each | connections |",
        "|---|---|---|---|",
    ]
    lines += [f"| {who} | {how} | {each} | {n} |" for who, how, each, n in rows]
    lines.append(f"| **all of mcq** | | | **{total}** of {MAX_CONNECTIONS - KEPT_FREE} ({MAX_CONNECTIONS} less {KEPT_FREE} kept free) |")
    return "\n".join(lines)


def load(folder):
    docs = []
    for path in sorted(folder.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


def main(folder):
    folder = pathlib.Path(folder)
    docs = load(folder)
    validators = {
        kind: jsonschema.Draft7Validator(strict(json.loads((folder / "schemas" / file).read_text())))
        for kind, file in (("ScaledObject", "keda-scaledobject.json"), ("TriggerAuthentication", "keda-triggerauthentication.json"))
    }
    problems = []

    deployments = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Deployment"}
    secrets = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Secret"}
    configmaps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    auths = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "TriggerAuthentication"}
    pod_specs = [
        (name, d["kind"], d["metadata"]["name"], d["spec"]["template"]["spec"])
        for name, d in docs
        if d["kind"] in ("Deployment", "Job")
    ]

    def secret_defined(name, key):
        return key in secrets.get(name, {}).get("stringData", {})

    for file, doc in docs:
        if doc["kind"] in validators:
            for error in validators[doc["kind"]].iter_errors(doc):
                where = "/".join(str(p) for p in error.absolute_path)
                problems.append(f"{file}: /{where}: {error.message}")
        if doc["kind"] == "TriggerAuthentication":
            for ref in doc["spec"].get("secretTargetRef", []):
                if not secret_defined(ref["name"], ref["key"]):
                    problems.append(f"{file}: secret {ref['name']}/{ref['key']} is not defined")
        if doc["kind"] != "ScaledObject":
            continue
        target = deployments.get(doc["spec"]["scaleTargetRef"]["name"])
        if target is None:
            problems.append(f"{file}: scaleTargetRef names no Deployment in {folder}")
            continue
        container = target["spec"]["template"]["spec"]["containers"][0]
        args = container.get("args", [])
        for trigger in doc["spec"]["triggers"]:
            meta = trigger["metadata"]
            if trigger["type"] != "postgresql":
                continue
            auth = auths.get(trigger.get("authenticationRef", {}).get("name"))
            if auth is None:
                problems.append(f"{file}: the postgresql trigger names no TriggerAuthentication in {folder}")
            elif not any(r["parameter"] == "connection" for r in auth["spec"].get("secretTargetRef", [])):
                problems.append(f"{file}: TriggerAuthentication {auth['metadata']['name']} gives no `connection`")
            concurrency = flag(args, "--concurrency")
            if meta.get("targetQueryValue") != concurrency:
                problems.append(
                    f"{file}: targetQueryValue {meta.get('targetQueryValue')!r} "
                    f"is not the worker's --concurrency {concurrency!r}"
                )
            for state in ("'queued'", "'running'"):
                if state not in meta.get("query", ""):
                    problems.append(f"{file}: the query does not count {state} tasks")
        concurrency = flag(args, "--concurrency")
        if concurrency is not None:
            if flag(args, "--threads") != concurrency:
                problems.append(f"{file}: the worker's --threads is not its --concurrency {concurrency}")
            resources = container.get("resources", {})
            for side in ("requests", "limits"):
                cpu = resources.get(side, {}).get("cpu")
                if cpu is None or cpu_cores(cpu) != float(concurrency):
                    problems.append(f"{file}: the worker's CPU {side} {cpu!r} is not its --concurrency {concurrency}")

    # The CA file the database URL names, where every reader of the URL
    # finds it.
    url = database_url(secrets)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query) if url else {}
    ca_path = query.get("sslrootcert", [None])[0]
    for file, kind, name, spec in pod_specs:
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for volume in volumes.values():
            ref = volume.get("configMap", {}).get("name")
            if ref and ref not in configmaps:
                problems.append(f"{file}: {kind} {name}: ConfigMap {ref} is not defined")
        grace = spec.get("terminationGracePeriodSeconds", 30)
        for container in spec["containers"]:
            timeout = flag(container.get("args", []), "--shutdown-timeout")
            if timeout is not None and not grace > float(timeout):
                problems.append(
                    f"{file}: {kind} {name}: terminationGracePeriodSeconds {grace} "
                    f"must exceed --shutdown-timeout {timeout}"
                )
            reads_url = False
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref and not secret_defined(ref["name"], ref["key"]):
                    problems.append(f"{file}: {kind} {name}: secret {ref['name']}/{ref['key']} is not defined")
                if env["name"] == "DATABASE_URL":
                    reads_url = True
            if reads_url and ca_path:
                mount = mounted(spec, container, ca_path)
                if mount is None or mount["name"] not in volumes:
                    problems.append(f"{file}: {kind} {name}: the database URL's sslrootcert {ca_path} is not mounted")
    if ca_path:
        keda_values = folder / "keda" / "values.yaml"
        values = yaml.safe_load(keda_values.read_text()) if keda_values.exists() else {}
        keda = values.get("volumes", {}).get("keda", {})
        mounts = {m["name"]: m for m in keda.get("extraVolumeMounts", [])}
        found = [
            v for v in keda.get("extraVolumes", [])
            if v["name"] in mounts and posixpath.dirname(ca_path).rstrip("/") == mounts[v["name"]]["mountPath"].rstrip("/")
        ]
        if not found:
            problems.append(f"{keda_values}: KEDA's operator does not mount the directory of sslrootcert {ca_path}")

    # Each Ingress host reaches an API that answers to it, over TLS.
    services = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Service"}
    for file, doc in docs:
        if doc["kind"] != "Ingress":
            continue
        tls_hosts = {h for entry in doc["spec"].get("tls", []) for h in entry.get("hosts", [])}
        for rule in doc["spec"].get("rules", []):
            host = rule.get("host")
            if host not in tls_hosts:
                problems.append(f"{file}: host {host!r} is not covered by the Ingress's TLS")
            for path in rule.get("http", {}).get("paths", []):
                service = services.get(path["backend"]["service"]["name"])
                if service is None:
                    problems.append(f"{file}: backend {path['backend']['service']['name']} is no Service in {folder}")
                    continue
                selector = service["spec"]["selector"]
                for deployment in deployments.values():
                    labels = deployment["spec"]["template"]["metadata"]["labels"]
                    if any(labels.get(k) != v for k, v in selector.items()):
                        continue
                    container = deployment["spec"]["template"]["spec"]["containers"][0]
                    allowed = (setting(container, "--allowed-hosts", "MCQ_ALLOWED_HOSTS") or "").split(",")
                    if host not in allowed:
                        problems.append(
                            f"{file}: host {host!r} is not in --allowed-hosts of Deployment "
                            f"{deployment['metadata']['name']} ({','.join(allowed)})"
                        )

    # The connection budget, and the README's copy of it.
    rows, total = budget(docs)
    if total > MAX_CONNECTIONS - KEPT_FREE:
        problems.append(
            f"the manifests can open {total} PostgreSQL connections, over the "
            f"{MAX_CONNECTIONS - KEPT_FREE} budgeted ({MAX_CONNECTIONS} less {KEPT_FREE} kept free)"
        )
    readme = folder.parent / "README.md"
    text = readme.read_text()
    if BUDGET_BEGIN not in text or BUDGET_END not in text:
        problems.append(f"{readme}: no connection budget table between {BUDGET_BEGIN} and {BUDGET_END}")
    else:
        written = text.split(BUDGET_BEGIN, 1)[1].split(BUDGET_END, 1)[0].strip()
        if written != budget_table(rows, total):
            problems.append(
                f"{readme}: the connection budget table is not the manifests' "
                f"(print it with: python3 deploy/check_k8s.py --budget {folder})"
            )

    for problem in problems:
        print(f"check_k8s: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_k8s: {len(docs)} resources in {folder} agree; {total} of {MAX_CONNECTIONS - KEPT_FREE} connections budgeted")
    return 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--budget"]:
        folder = pathlib.Path(arguments[1] if len(arguments) > 1 else "deploy/k8s")
        print(budget_table(*budget(load(folder))))
        sys.exit(0)
    sys.exit(main(arguments[0] if arguments else "deploy/k8s"))
