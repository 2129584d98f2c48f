#!/bin/bash
# Profiles one build's REST echo under load, for bench/README.md's tables
# by mechanism (issue #40): wrk -t2 -c16 for 8 s, `perf record -F 199
# --call-graph dwarf` on the server, its CPU from /proc over the same
# seconds. Writes OUT/script.txt (for mechanisms.py) and OUT/reqs.
#
#   bench/profile/profile.sh OUT TOOLHOST ECHO_WASM [PORT]
#
# TOOLHOST needs symbols: `cargo build --profile profiling -p toolhost`
# (target/profiling/toolhost). Needs perf and wrk.
set -euo pipefail
out=$1 bin=$2 echo_wasm=$3 port=${4:-18951}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"; mkdir -p "$out/plugins"; cp "$echo_wasm" "$out/plugins/echo.wasm"
"$bin" serve --plugins "$out/plugins" --cache-dir "$out/cache" --listen "127.0.0.1:$port" > "$out/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 3
url="http://127.0.0.1:$port/tools/echo"
wrk -t2 -c16 -d2s -s "$here/rest.lua" "$url" > /dev/null
perf record -F 199 --call-graph dwarf,32768 -p "$pid" -o "$out/perf.data" -- sleep 8.4 > /dev/null 2>&1 &
recorder=$!
sleep 0.2
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(cpu)
load=$(wrk -t2 -c16 -d8s -s "$here/rest.lua" "$url")
after=$(cpu)
wait $recorder
requests=$(echo "$load" | grep -oE '[0-9]+ requests in' | cut -d' ' -f1)
echo "$requests" > "$out/reqs"
ticks=$(getconf CLK_TCK)
echo "$requests requests; server CPU $(( (after - before) * 1000000 / ticks / requests )) us a request (/proc)"
perf script --no-inline -i "$out/perf.data" -F ip,sym,dso 2> /dev/null > "$out/script.txt"
