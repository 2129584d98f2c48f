"""Source tools that reach the world, measured against one toolhost binary
(one run): packages, HTTP, the first source on a fresh server, module-level
work, thirty publishes at once. `make bench` runs it against the release
binary after the harness; alone, `python3 bench/scripts/sources_reach.py
target/serve/toolhost` after `make serve` (it needs a Python with pip:
the test venv's, TOOLHOST_PYTHON, or python3; and npm). bench/README.md's
"Sources that reach the world" is its table."""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIN = sys.argv[1]
VENV = os.path.join(os.path.dirname(__file__), "../../target/test-venv/bin/python")
PY = os.environ.get("TOOLHOST_PYTHON", VENV if os.path.exists(VENV) else "python3")
OUT = {}


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


LOGS = []


def serve(folder, *extra, cache=None):
    port = free_port()
    args = [BIN, "serve", "--plugins", folder, "--listen", f"127.0.0.1:{port}", *extra]
    if cache:
        args += ["--cache-dir", cache]
    log = tempfile.NamedTemporaryFile("w+", prefix="toolhost-log-", delete=False)
    LOGS.append(log.name)
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, text=True)
    proc.log = log.name
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(base + "/health", timeout=1).read(); break
        except Exception:
            time.sleep(0.05)
    return proc, base


def logged(proc, says, what, timeout):
    """Waits for a line of the server's log for which `says` holds; how
    long that took."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if any(says(line) for line in open(proc.log)):
            return time.monotonic() - start
        time.sleep(0.05)
    raise SystemExit(f"never logged: {what}")


def image_of(proc, plugin, timeout=120):
    """Waits for the server to say it took `plugin`'s image."""
    return logged(proc, lambda line: "image taken" in line and f"plugin={plugin} " in line,
                  f"an image of {plugin}", timeout)


def optimised(proc, timeout=600):
    """Waits for the server to say the runtime's optimised code serves: the
    optimiser's compile (hundreds of MB for a while) is over."""
    logged(proc, lambda line: "optimised code now serves" in line,
           "the runtime's optimised code", timeout)


def call(base, tool, args, token=None):
    req = urllib.request.Request(base + "/tools/" + tool, data=json.dumps(args).encode(),
                                 headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        return json.load(urllib.request.urlopen(req, timeout=60))
    except urllib.error.HTTPError as e:
        return json.load(e)


def put(base, id, body, kind, token):
    req = urllib.request.Request(base + "/plugins/" + id, data=body, method="PUT",
                                 headers={"Content-Type": kind, "Authorization": "Bearer " + token})
    try:
        return urllib.request.urlopen(req, timeout=600).status
    except urllib.error.HTTPError as e:
        return e.code


def drop(folder, name, text):
    tmp = os.path.join(folder, "." + name + ".tmp")
    open(tmp, "w").write(text); os.rename(tmp, os.path.join(folder, name))


def wait_tool(base, tool, args, timeout=120):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        r = call(base, tool, args)
        if not r.get("error", {}).get("code") == "TOOL_NOT_FOUND" and "content" in r:
            return time.monotonic() - start, r
        time.sleep(0.01)
    raise SystemExit(f"{tool} never answered")


def p50_server(base, tool, args, n=200, token=None, pause=0.0):
    ms = []
    for _ in range(n):
        ms.append(call(base, tool, args, token)["meta"]["durationMs"])
        time.sleep(pause)
    return statistics.median(ms)


def after_image(base, proc, plugin, tool, args, n):
    """A call once the module's image is taken, p50: back to back (each
    call instantiates its own copy) and spaced 50 ms apart (a spare made
    ahead with the image serves it)."""
    image_of(proc, plugin)
    call(base, tool, args)
    back = p50_server(base, tool, args, n=n)
    spaced = p50_server(base, tool, args, n=n, pause=0.05)
    return f"{spaced:.1f} ms spaced, {back:.1f} ms back to back"


PLAIN = '''from toolhost_plugin import tool

@tool(name="plain")
def plain(text: str) -> str:
    """Echo.

    Args:
        text: Some text
    """
    return text
'''
TABLE = '''from toolhost_plugin import tool

TABLE = {i: str(i) for i in range(200_000)}

@tool(name="table")
def table(key: int) -> str:
    """Looks up.

    Args:
        key: A key
    """
    return TABLE.get(key, "")
'''
SOUP = '''from bs4 import BeautifulSoup
from dateutil import parser
from toolhost_plugin import tool

@tool(name="{name}")
def soup(html: str) -> str:
    """Reads a page.

    Args:
        html: Some HTML
    """
    return BeautifulSoup(html, "html.parser").get_text()
'''
FETCH = '''from toolhost_plugin import http, tool

@tool(name="fetch")
def fetch(url: str) -> str:
    """Gets a URL.

    Args:
        url: Where
    """
    return http.get(url).text
'''
JSYAML = '''import YAML from "yaml";
import { tool, exportPlugin } from "./toolhost.js";
const read = tool({ name: "{name}", description: "Reads YAML.",
  input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run: ({ text }) => YAML.parse(text) });
export const { tools, resources, prompts, completion } = exportPlugin({ tools: [read] });
'''


class Hello(BaseHTTPRequestHandler):
    # Keep-alive, as an API's server is: each request is not a new
    # connection and a new thread of this Python server. Its headers and
    # body go out in one write, with no Nagle delay: else each response
    # waits 40 ms for the client's delayed acknowledgement.
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def do_GET(self):
        body = b"hello"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


def pss_kib(pid):
    """The process's proportional set size: a page mapped in several places
    counts once (a mapped image's page, in every pool slot that holds the
    image, counts once per slot in VmRSS)."""
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("Pss:"):
            return int(line.split()[1])


def memory_of_thirty(folder):
    """RSS with 30 live sources importing packages, beyond none: a server
    started with the package store and an empty compile cache, measured
    once its runtime is compiled ahead and again once thirty sources are
    live, each called on the baseline and then on the optimised code, and
    the server has been quiet past its trim of unused pool slots (5 s).
    VmRSS counts a page once per mapping of it; Pss, once (what the machine
    pays, and what a container's memory limit counts)."""
    proc, base = serve(folder, cache=tempfile.mkdtemp(prefix="cache-"))
    logged(proc, lambda line: "compiled ahead" in line and "python" in line,
           "the python runtime compiled ahead", 300)
    time.sleep(3)
    base_rss, base_pss = rss_kib(proc.pid), pss_kib(proc.pid)
    for i in range(30):
        drop(folder, f"soup{i}.py", SOUP.replace("{name}", f"soup{i}"))
    for i in range(30):
        wait_tool(base, f"soup{i}", {"html": "<i>y</i>"})
    optimised(proc)
    for i in range(30):
        call(base, f"soup{i}", {"html": "<i>y</i>"})
    time.sleep(7)
    OUT["RSS with 30 live sources importing packages, beyond none (fresh server; each called; quiet 7 s): VmRSS / Pss"] = \
        f"+{(rss_kib(proc.pid) - base_rss) / 1024:.0f} / +{(pss_kib(proc.pid) - base_pss) / 1024:.0f} MiB"
    quiet = [call(base, f"soup{i}", {"html": "<i>y</i>"})["meta"]["durationMs"] for i in range(10)]
    OUT["a call of one of those sources after the server was quiet (its slots trimmed), p50 of 10"] = \
        f"{statistics.median(quiet):.1f} ms"
    proc.terminate(); proc.wait()


def main():
    work = tempfile.mkdtemp(prefix="measure-")
    folder = os.path.join(work, "plugins"); os.makedirs(folder)
    # packages add, warm pip cache
    t = time.monotonic()
    subprocess.run([BIN, "packages", "add", "--plugins", folder, "python-dateutil", "beautifulsoup4"],
                   check=True, env={**os.environ, "TOOLHOST_PYTHON": PY}, capture_output=True)
    OUT["packages add of two pure-Python packages, warm pip cache"] = f"{time.monotonic() - t:.1f} s"
    subprocess.run([BIN, "packages", "add", "--lang", "js", "--plugins", folder, "yaml@2"], check=True,
                   capture_output=True)
    # A folder with the package store and no source yet.
    clean = os.path.join(work, "clean")
    shutil.copytree(folder, clean)
    # the first Python source on a freshly started server
    cache = os.path.join(work, "cache")
    proc, base = serve(folder, cache=cache)
    drop(folder, "plain.py", PLAIN)
    took, _ = wait_tool(base, "plain", {"text": "x"})
    OUT["the first Python source on a freshly started server (empty cache) -> first answer"] = f"{took:.2f} s"
    OUT["a plain Python source call, p50 of server time over its first 200 calls"] = f"{p50_server(base, 'plain', {'text': 'x'}):.2f} ms"
    drop(folder, "table.py", TABLE)
    wait_tool(base, "table", {"key": 5})
    OUT["a Python source whose module builds a 200,000-entry table: a call, p50 (of 50)"] = after_image(base, proc, "table", "table", {"key": 5}, 50)
    # From a quiet server, its runtime's optimised code in.
    optimised(proc)
    time.sleep(2)
    t = time.monotonic(); drop(folder, "soup0.py", SOUP.replace("{name}", "soup0"))
    took, _ = wait_tool(base, "soup0", {"html": "<b>x</b>"})
    OUT["publish -> first answer, Python importing bs4 and dateutil (a drop)"] = f"{took:.2f} s"
    OUT["a Python source importing bs4 and dateutil at module level: a call, p50 (of 30)"] = after_image(base, proc, "soup0", "soup0", {"html": "<b>x</b>"}, 30)
    t = time.monotonic(); drop(folder, "yaml0.js", JSYAML.replace("{name}", "yaml0"))
    took, _ = wait_tool(base, "yaml0", {"text": "a: 1"})
    OUT["publish -> first answer, JavaScript importing a package (yaml)"] = f"{took * 1000:.0f} ms"
    OUT["a JavaScript source importing yaml: a call, p50 (of 50)"] = f"{p50_server(base, 'yaml0', {'text': 'a: 1'}, n=50):.1f} ms"
    # HTTP from a source to a loopback origin
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{httpd.server_address[1]}"
    open(os.path.join(folder, "_room.toml"), "w").write(f'[http]\nallow = ["{origin}"]\n')
    time.sleep(1)
    drop(folder, "fetch.py", FETCH)
    wait_tool(base, "fetch", {"url": origin})
    with_http = p50_server(base, "fetch", {"url": origin})
    without = p50_server(base, "plain", {"text": "x"})
    OUT["an HTTP call from a source to a loopback origin, beyond the same call without it (p50 of 200)"] = f"{with_http - without:.2f} ms ({with_http:.2f} vs {without:.2f})"
    os.unlink(os.path.join(folder, "_room.toml"))
    proc.terminate(); proc.wait()
    memory_of_thirty(clean)
    # the same on a restarted server: its compile cache kept, a new folder
    fresh = os.path.join(work, "again"); os.makedirs(fresh)
    proc, base = serve(fresh, cache=cache)
    drop(fresh, "plain.py", PLAIN)
    took, _ = wait_tool(base, "plain", {"text": "x"})
    OUT["the first Python source on a restarted server (compile cache kept) -> first answer"] = f"{took:.2f} s"
    proc.terminate(); proc.wait()
    # 30 people publish Python sources importing packages at once
    tokens = os.path.join(work, "tokens.toml")
    lines = []
    for i in range(30):
        lines.append(f'[[token]]\nname = "p{i}"\nsecret = "person-{i}-secret-0123456789"\nrole = "publisher"\n')
    open(tokens, "w").write("\n".join(lines))
    proc, base = serve(folder, "--tokens", tokens, cache=cache)
    time.sleep(3)
    t = time.monotonic()
    def one(i):
        status = put(base, f"p{i}/page", SOUP.replace("{name}", "page").encode(), "text/x-python",
                     f"person-{i}-secret-0123456789")
        return status, time.monotonic() - t
    with ThreadPoolExecutor(30) as pool:
        results = list(pool.map(one, range(30)))
    statuses = {s for s, _ in results}
    OUT["30 people publish Python sources importing packages at once: last live"] = f"{max(d for _, d in results):.1f} s (statuses {sorted(statuses)})"
    proc.terminate(); proc.wait()
    runtimes = os.path.join(os.path.dirname(__file__), "../../target/runtimes")
    sizes = {name: os.path.getsize(os.path.join(runtimes, name)) for name in
             ["python.wasm", "python.wasm.zst", "js.wasm", "js.wasm.zst", "python-stdlib.tar.zst"]}
    OUT["embedded runtimes (bytes)"] = sizes
    OUT["binary"] = f"{os.path.getsize(BIN) / 1e6:.1f} MB ({BIN})"
    for k, v in OUT.items():
        print(f"| {k} | {v} |")
    shutil.rmtree(work, ignore_errors=True)
    for log in LOGS:
        os.unlink(log)


main()
