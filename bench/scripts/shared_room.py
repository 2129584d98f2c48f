"""The room on many machines, measured against one toolhost binary (one
run): replicas sharing publishes through Debian's redis-server (append-only,
synced at every write), behind Debian's haproxy with deploy/haproxy.cfg.
`make bench` runs it against the release binary; alone, `python3
bench/scripts/shared_room.py target/release/toolhost plugins/echo.wasm`.
bench/README.md's "The room on many machines" is its table."""
import hashlib, json, os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BIN = sys.argv[1]
ECHO = sys.argv[2] if len(sys.argv) > 2 else "plugins/echo.wasm"
ADMIN = "admin-secret-0123456789-abcdef"
OUT = {}
PEOPLE = 300


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def connects(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def token(person):
    return f"{person}-secret-0123456789-abcdefgh"


def wait(what, condition, timeout=120):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(0.005)
    raise SystemExit(f"timed out: {what}")


def status_of(req, timeout=30):
    """The status a request is answered with; None if the connection failed
    (a replica killed under it)."""
    try:
        return urllib.request.urlopen(req, timeout=timeout).status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None


def get(url, tok=ADMIN):
    return status_of(urllib.request.Request(url, headers={"Authorization": "Bearer " + tok}))


def call(base, tool, tok):
    req = urllib.request.Request(base + "/tools/" + tool, data=b'{"text": "a b c"}',
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + tok})
    try:
        return json.load(urllib.request.urlopen(req, timeout=30))
    except urllib.error.HTTPError as e:
        try:
            return json.load(e)
        except ValueError:  # the balancer's own error page
            return None
    except Exception:
        return None


class Callers:
    """Calls a tool through the balancer from two threads until stopped;
    counts the calls and the failed ones."""

    def __init__(self, base, tool, tok):
        self.calls, self.failed, self.stop = 0, 0, threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(base, tool, tok)) for _ in range(2)]
        for t in self.threads:
            t.start()

    def run(self, base, tool, tok):
        while not self.stop.is_set():
            r = call(base, tool, tok)
            self.calls += 1
            if r is None or "content" not in r or r.get("isError"):
                self.failed += 1

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join()
        return f"{self.failed} of {self.calls}"


def put(base, id, body, kind, tok):
    return status_of(urllib.request.Request(
        base + "/plugins/" + id, data=body, method="PUT",
        headers={"Content-Type": kind, "Authorization": "Bearer " + tok}), timeout=120)


def source(name, said):
    return f'''from toolhost_plugin import tool


@tool(name="{name}")
def run(text: str) -> str:
    """Counts words.

    Args:
        text: The text
    """
    return "{said} " + str(len(text.split()))
'''.encode()


class Room:
    def __init__(self, work):
        self.work = work
        self.tokens = os.path.join(work, "tokens.toml")
        with open(self.tokens, "w") as f:
            f.write(f'[[token]]\nname = "admin"\nsecret = "{ADMIN}"\nrole = "admin"\n')
            for n in range(PEOPLE):
                f.write(f'[[token]]\nname = "p{n}"\nsecret = "{token(f"p{n}")}"\nrole = "publisher"\n')
        self.redis_port = free_port()
        redis_dir = os.path.join(work, "redis"); os.makedirs(redis_dir)
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--dir", redis_dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait("redis", lambda: connects(self.redis_port))
        self.replicas = []
        self.cache = os.path.join(work, "cache")

    def start(self, index=None):
        folder = os.path.join(self.work, f"plugins{len(self.replicas) if index is None else index}")
        os.makedirs(folder, exist_ok=True)
        port = free_port()
        log = open(os.path.join(self.work, f"log{port}"), "w")
        proc = subprocess.Popen(
            [BIN, "serve", "--plugins", folder, "--listen", f"127.0.0.1:{port}",
             "--redis", f"redis://127.0.0.1:{self.redis_port}/", "--tokens", self.tokens,
             "--cache-dir", self.cache, "--max-plugins-per-person", "100",
             "--max-mib-per-person", "512"],
            stdout=subprocess.DEVNULL, stderr=log)
        base = f"http://127.0.0.1:{port}"
        took = wait("a replica to be ready", lambda: get(base + "/ready") == 200, timeout=600)
        replica = {"proc": proc, "base": base, "port": port, "folder": folder}
        if index is None:
            self.replicas.append(replica)
        else:
            self.replicas[index] = replica
        return replica, took

    def haproxy(self):
        port = free_port()
        template = open("deploy/haproxy.cfg").read()
        servers = "".join(f"    server replica{i} 127.0.0.1:{r['port']} check\n"
                          for i, r in enumerate(self.replicas))
        config = template.replace("bind :8000", f"bind 127.0.0.1:{port}").replace(
            "    server-template replica 3 toolhost:8000 check resolvers dns init-addr none\n", servers)
        path = os.path.join(self.work, "haproxy.cfg"); open(path, "w").write(config)
        program = "/usr/sbin/haproxy" if os.path.exists("/usr/sbin/haproxy") else "haproxy"
        self.balancer = subprocess.Popen([program, "-db", "-f", path],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{port}"
        wait("haproxy", lambda: get(self.base + "/ready") == 200)

    def stop(self):
        for r in self.replicas:
            r["proc"].kill()
        for p in [getattr(self, "balancer", None), self.redis]:
            if p:
                p.kill()

    def redis_memory(self):
        out = subprocess.run(["redis-cli", "-p", str(self.redis_port), "INFO", "memory"],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("used_memory:"):
                return int(line.split(":")[1])


def serves(replica, id, digest):
    req = urllib.request.Request(replica["base"] + "/plugins",
                                 headers={"Authorization": "Bearer " + ADMIN})
    report = json.load(urllib.request.urlopen(req, timeout=30))
    return any(p["id"] == id and p.get("contentHash") == digest and p["state"] == "loaded"
               for p in report["plugins"])


def everywhere(room, tool, said, tok):
    """Waits until every replica answers `tool` with `said`; when the last did."""
    def answers(replica):
        r = call(replica["base"], tool, tok)
        return r is not None and r.get("content", [{}])[0].get("text", "").startswith(said)
    pending = list(room.replicas)
    while pending:
        pending = [r for r in pending if not answers(r)]
        if pending:
            time.sleep(0.002)
    return time.monotonic()


def main():
    work = tempfile.mkdtemp(prefix="shared-room-")
    room = Room(work)
    try:
        for _ in range(3):
            room.start()
        room.haproxy()
        # One source a publish, 50 in turn, through the balancer.
        took = []
        for n in range(50):
            person = f"p{n % PEOPLE}"
            start = time.monotonic()
            status = put(room.base, f"{person}/t{n}", source(f"t{n}", f"v{n}"), "text/x-python",
                         token(person))
            assert status == 201, status
            took.append(everywhere(room, f"{person}__t{n}", f"v{n}", token(person)) - start)
        took.sort()
        OUT["a source published through the balancer, answering on every replica: p50 / p99 of 50"] = \
            f"{statistics.median(took) * 1000:.0f} / {took[int(len(took) * 0.99) - 1] * 1000:.0f} ms"
        # A 2 MB component, ten times.
        echo = open(ECHO, "rb").read()
        took = []
        for n in range(10):
            pad = os.urandom(2 * 1024 * 1024 - len(echo))
            name = b"bench-pad"
            payload = bytes([len(name)]) + name + pad
            size, leb = len(payload), bytearray()
            while True:
                byte = size & 0x7F; size >>= 7
                leb.append(byte | (0x80 if size else 0))
                if not size:
                    break
            component = echo + b"\x00" + bytes(leb) + payload
            digest = hashlib.sha256(component).hexdigest()
            start = time.monotonic()
            status = put(room.base, f"p0/echo{n}", component, "application/wasm", token("p0"))
            assert status == 201, status
            for replica in room.replicas:
                wait("the component on a replica",
                     lambda: serves(replica, f"p0/echo{n}", digest))
            took.append(time.monotonic() - start)
            assert status_of(urllib.request.Request(
                room.base + f"/plugins/p0/echo{n}", method="DELETE",
                headers={"Authorization": "Bearer " + token("p0")}), timeout=60) == 200
        took.sort()
        OUT["a 2 MB component the same way: p50 / worst of 10"] = \
            f"{statistics.median(took) * 1000:.0f} / {took[-1] * 1000:.0f} ms"
        # 300 people publish at once through the balancer.
        callers = Callers(room.base, "p1__t1", token("p1"))
        start = time.monotonic()

        def burst(n):
            person = f"p{n}"
            assert put(room.base, f"{person}/b{n}", source(f"b{n}", f"b{n}"), "text/x-python",
                       token(person)) == 201
        with ThreadPoolExecutor(PEOPLE) as pool:
            list(pool.map(burst, range(PEOPLE)))
        for n in range(PEOPLE):
            everywhere(room, f"p{n}__b{n}", f"b{n}", token(f"p{n}"))
        OUT["300 people publish Python sources at once through the balancer: last live on every replica"] = \
            f"{time.monotonic() - start:.1f} s"
        OUT["calls through the balancer during that burst: failed"] = callers.end()
        # A replica SIGKILLed during 50 publishes, then restarted.
        acked, lock = [], threading.Lock()
        callers = Callers(room.base, "p1__t1", token("p1"))

        def publish(n):
            person = f"p{n % PEOPLE}"
            if put(room.base, f"{person}/k{n}", source(f"k{n}", f"k{n}"), "text/x-python",
                   token(person)) == 201:
                with lock:
                    acked.append((person, n))
        with ThreadPoolExecutor(5) as pool:
            futures = [pool.submit(publish, n) for n in range(50)]
            wait("a third acknowledged", lambda: len(acked) >= 15)
            room.replicas[0]["proc"].kill()
            for f in futures:
                f.result()
        killed_calls = callers.end()
        room.start(0)
        missing = 0
        for person, n in acked:
            for replica in room.replicas:
                try:
                    wait("", lambda: (call(replica["base"], f"{person}__k{n}", token(person)) or {})
                         .get("content", [{}])[0].get("text", "").startswith(f"k{n}"), timeout=30)
                except SystemExit:
                    missing += 1
        OUT["a replica SIGKILLed during 50 publishes: acknowledged, then missing on any replica"] = \
            f"{len(acked)} acknowledged, {missing} missing"
        OUT["calls through the balancer meanwhile (a replica killed under them): failed"] = killed_calls
        # A room of 1,000 sources; a fresh replica joining it.
        def publish_many(n):
            person = f"p{n % PEOPLE}"
            assert put(room.base, f"{person}/m{n}", source(f"m{n}", f"m{n}"), "text/x-python",
                       token(person)) == 201
        start = time.monotonic()
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(publish_many, range(1000 - 100 - PEOPLE)))
        published = time.monotonic() - start
        OUT["1,000 sources in the room: Redis's used memory"] = \
            f"{room.redis_memory() / 1048576:.1f} MiB (the last {1000 - 100 - PEOPLE} published in {published:.0f} s)"
        _, took = room.start()
        OUT["a fresh replica joining 1,000 published sources: /ready"] = f"{took:.1f} s"
    finally:
        room.stop()
        shutil.rmtree(work, ignore_errors=True)
    width = max(len(k) for k in OUT)
    for k, v in OUT.items():
        print(f"{k:<{width}}  {v}")


main()
