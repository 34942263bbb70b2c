#!/usr/bin/env bash
# System tools the test suite needs, from Debian's packages, installed only when missing:
# - chromium: the browser test drives Airflow's UI with Playwright on it (Playwright's own
#   browser download is not used);
# - docker-compose: validates docker-compose.yaml (`docker compose config`) when the Docker
#   client has no compose plugin.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

missing=()
have chromium || have chromium-browser || missing+=(chromium)
if ! (have docker && docker compose version >/dev/null 2>&1) && ! have docker-compose; then
    missing+=(docker-compose)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif have sudo && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "install-test-tools: ${missing[*]} missing, and installing needs root (or sudo without a password)." >&2
    echo "install-test-tools: run 'sudo apt-get install -y ${missing[*]}' once, then 'make test' again." >&2
    exit 1
fi
if ! have apt-get; then
    echo "install-test-tools: ${missing[*]} missing and no apt-get to install them; install them with" >&2
    echo "install-test-tools: this system's package manager so that they are on PATH." >&2
    exit 1
fi

echo "==> installing Debian's ${missing[*]} for the test suite"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
for tool in "${missing[@]}"; do
    have "$tool" || { echo "install-test-tools: apt-get finished but '$tool' is not on PATH." >&2; exit 1; }
done
