#!/usr/bin/env bash
# Make sure a Java runtime >= 17 is on PATH (Spark 4 needs it); install
# OpenJDK 17 with apt when it is missing or too old.
set -euo pipefail
version() { java -version 2>&1 | awk -F'"' '/version/ {print $2}' | cut -d. -f1; }
if command -v java >/dev/null 2>&1 && [ "$(version)" -ge 17 ] 2>/dev/null; then
  exit 0
fi
echo "Java >= 17 not found: installing openjdk-17-jre-headless with apt" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
java -version
