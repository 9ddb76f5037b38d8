#!/usr/bin/env bash
# The main job on the embedded defaults, end to end, in a throwaway home.
# Grows with the project: version → refusal codes → (resolve, fetch, materialize, verify) …
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/cruxprov
home=$(mktemp -d)
trap 'chmod -R u+w "$home" 2>/dev/null; rm -rf "$home"' EXIT
export CRUXPROV_HOME=$home

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "cruxprov version"
$bin version

step "refusal codes (exit 78; docs/refusals.md says what each means and what to do)"
$bin refusals

if [ -x scripts/demo.d/run.sh ]; then
	bash scripts/demo.d/run.sh "$bin" "$home"
fi
echo
echo "demo: ok"
