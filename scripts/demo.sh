#!/usr/bin/env bash
# The main job of README.md: builds vtnt, starts the built-in lab network (an emulated MPLS
# Internet with a tunnel of every class and routers of every vendor profile), runs TNT on
# every destination from inside it, and prints what TNT found next to the lab's ground
# truth. Pass a topology file to use another network: bash scripts/demo.sh my.toml
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
echo "vtnt demo: building vtnt and what it runs (cargo xtask dist, release)..." >&2
cargo xtask dist >/dev/null
V="$PWD/target/dist/bin/vtnt"
NAME=vtnt-demo
OUT="$PWD/demo-results"
mkdir -p "$OUT"
"$V" lab down --name "$NAME" >/dev/null 2>&1 || true
trap '"$V" lab down --name "$NAME" >/dev/null 2>&1 || true' EXIT
"$V" lab up --name "$NAME" ${1:+"$1"}
"$V" lab truth --name "$NAME" > "$OUT/truth.txt"
"$V" lab truth --name "$NAME" --json > "$OUT/truth.json"
"$V" lab truth --name "$NAME" --targets > "$OUT/targets.txt"
if [ ! -s "$OUT/targets.txt" ]; then
  echo "vtnt demo: no destination found in the lab's truth ($OUT/truth.txt)" >&2
  exit 1
fi

echo
echo "== The lab's ground truth (what TNT should find) =="
awk '/^routers:/ { exit } { print }' "$OUT/truth.txt"
echo
echo "== vtnt tnt, run from the lab's vantage point =="
"$V" lab exec --name "$NAME" -- "$V" tnt --pps 200 -O text --targets "$OUT/targets.txt"
"$V" lab exec --name "$NAME" -- "$V" tnt --pps 200 -O json -o "$OUT/tnt.json" --targets "$OUT/targets.txt" 2>/dev/null
echo
echo "Results: $OUT/tnt.json (scamper JSON with \"tnt\" annotations), truth in $OUT/truth.json"
