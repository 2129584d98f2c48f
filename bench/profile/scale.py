#!/usr/bin/env python3
"""A/B by script for the 1,000-plugin rows (issue #39), between bench runs.

    bench/profile/scale.py start TOOLHOST [ROUNDS]   warm restarts to all 10,000 tools listed
    bench/profile/scale.py drop TOOLHOST [ROUNDS]    a fresh echo renamed in beside them, until it answers

Makes 1,000 copies of the benchtool fixture (tests/fixtures, built for
wasm32-wasip2 --release) in /tmp/th-scale/plugins, with a cache per
binary name (the first start is cold and takes minutes). Prints one line
per round: milliseconds, and for `start` the server's CPU and RSS from
/proc. Alternate two builds, a round or two each: this machine drifts.
"""
import json, os, re, shutil, subprocess, sys, threading, time, urllib.error, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHTOOL = f"{ROOT}/tests/fixtures/target/wasm32-wasip2/release/benchtool.wasm"
ECHO = f"{ROOT}/plugins/echo.wasm"
WORK = "/tmp/th-scale"
MARKER = b"BENCHTOOL_PREFIX_0000000"


def plugins(n=1000):
    folder = f"{WORK}/plugins"
    if os.path.isdir(folder) and len([f for f in os.listdir(folder) if f.endswith(".wasm")]) == n:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    wasm = open(BENCHTOOL, "rb").read()
    at = wasm.index(MARKER)
    for i in range(n):
        name = ("bench_tool_%013d" % (10000 + i)).encode()
        open(f"{folder}/p{i:04d}.wasm", "wb").write(wasm[:at] + name + wasm[at + len(MARKER):])
    return folder


def serve(binary, folder, cache):
    server = subprocess.Popen(
        [binary, "serve", "--plugins", folder, "--cache-dir", cache, "--listen", "127.0.0.1:0", "--debounce-ms", "50"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env={**os.environ, "TOOLHOST_LOG": "info,rmcp=warn"})
    while True:
        line = server.stderr.readline().decode()
        if not line:
            sys.exit("the server ended before listening")
        found = re.search(r"listening on http://([0-9.:]+)", line)
        if found:
            break
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    return server, found.group(1)


def request(address, path, body=None):
    req = urllib.request.Request(f"http://{address}{path}", data=body.encode() if body else None,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def listed(address):
    return json.loads(request(address, "/health")[1]).get("tools")


def start(binary, rounds):
    folder, cache = plugins(), f"{WORK}/cache-{os.path.basename(binary)}"
    for _ in range(rounds):
        began = time.time()
        server, address = serve(binary, folder, cache)
        while listed(address) != 10000:
            time.sleep(0.005)
        elapsed = (time.time() - began) * 1e3
        time.sleep(1)
        rss = int(open(f"/proc/{server.pid}/status").read().split("VmRSS:")[1].split()[0]) / 1024
        stat = open(f"/proc/{server.pid}/stat").read().split(")")[1].split()
        cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
        print(f"start {elapsed:.0f} ms  cpu {cpu:.2f} s  rss {rss:.0f} MiB", flush=True)
        server.kill()
        server.wait()


def drop(binary, rounds):
    folder, cache = plugins(), f"{WORK}/cache-{os.path.basename(binary)}"
    server, address = serve(binary, folder, cache)
    while listed(address) != 10000:
        time.sleep(0.01)
    time.sleep(1)
    echo = open(ECHO, "rb").read()
    call = lambda: request(address, "/tools/echo", '{"text":"x"}')[0]
    for round in range(rounds):
        # New bytes each round (a custom section), so the cache misses.
        section = b"round%d-%f" % (round, time.time())
        body = bytes([1]) + b"x" + section
        open(f"{folder}/.echo.tmp", "wb").write(echo + b"\x00" + bytes([len(body)]) + body)
        began = time.time()
        os.rename(f"{folder}/.echo.tmp", f"{folder}/zz-echo.wasm")
        while call() != 200:
            time.sleep(0.001)
        print(f"drop {(time.time() - began) * 1e3:.0f} ms", flush=True)
        os.remove(f"{folder}/zz-echo.wasm")
        while call() != 404:
            time.sleep(0.01)
        time.sleep(1)
    server.kill()
    server.wait()


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("start", "drop"):
        sys.exit(__doc__)
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    {"start": start, "drop": drop}[sys.argv[1]](sys.argv[2], rounds)
