#!/usr/bin/env bash
# Make sure Maven is on PATH (it fetches Delta Lake's Spark connector from the
# repositories in Maven's own settings); install it with apt when missing.
set -euo pipefail
if command -v mvn >/dev/null 2>&1; then
  exit 0
fi
echo "Maven not found: installing maven with apt" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq maven >/dev/null
mvn -v | head -1
