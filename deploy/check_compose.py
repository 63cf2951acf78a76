"""Checks of docker-compose.yml that `docker compose config` cannot make.

Reads the resolved configuration (`docker compose config`) on stdin and
the file itself, and checks: the migration runs once PostgreSQL is
healthy and every other mcq service waits for it to succeed; workers
publish no host port and have no fixed name (so `--scale worker=N`
works); their stop grace period outlasts their --shutdown-timeout; and no
credentials are written inline in the file.

Usage: docker compose config | python3 deploy/check_compose.py docker-compose.yml
"""

import re
import sys

import yaml


def seconds(text):
    """Compose's duration syntax (`30s`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"([\d.]+)(ms|us|h|m|s)", str(text))
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(value) * units[unit] for value, unit in parts)


def flag(args, name):
    """The value following `name` in a command, or None."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
    return None


def main(path):
    resolved = yaml.safe_load(sys.stdin)["services"]
    written = yaml.safe_load(open(path))["services"]
    problems = []

    migrate = resolved.get("migrate", {})
    if migrate.get("depends_on", {}).get("postgres", {}).get("condition") != "service_healthy":
        problems.append("migrate must wait for postgres to be healthy")
    for name in ("api", "worker"):
        condition = resolved.get(name, {}).get("depends_on", {}).get("migrate", {}).get("condition")
        if condition != "service_completed_successfully":
            problems.append(f"{name} must wait for migrate to complete successfully")

    worker = resolved.get("worker", {})
    if worker.get("ports") or worker.get("container_name"):
        problems.append("worker must publish no host port and have no container_name (--scale)")
    timeout = flag(worker.get("command", []), "--shutdown-timeout") or "20"
    grace = seconds(worker.get("stop_grace_period", "10s"))
    if not grace > float(timeout):
        problems.append(f"worker stop_grace_period {grace} s must exceed --shutdown-timeout {timeout}")

    for name, service in written.items():
        env = service.get("environment", {})
        keys = env.keys() if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
        inline = [k for k in keys if "PASSWORD" in k or k == "DATABASE_URL"]
        if inline:
            problems.append(f"{name}: credentials inline ({', '.join(inline)}): use the env file")

    for problem in problems:
        print(f"check_compose: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_compose: {len(resolved)} services agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "docker-compose.yml"))
