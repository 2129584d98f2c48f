// A tool's view on the page, in Debian's chromium, headless, with
// puppeteer-core (pinned in tests/it/support).
//
//   node views_page.mjs show <base> <chromium> <shots> <config.json>
//   node views_page.mjs bench <base> <chromium> <shots> <config.json>
//
// config: {token, tool, other}. Signs in with <token>, calls <tool> in
// try-it and finds its view's frame: how long from the call's answer to
// the view showing the result; what the view was told (its input and
// result); a button in the view calling a tool of its plugin, one a tool
// outside the person's set, one a tool of another plugin of theirs, one a
// tool only for the model, and one that loads another page in its frame;
// and
// what the view's own probes found of the page (its token in
// sessionStorage, cookies, the parent's document) and of the network (the
// origin its CSP names, and <other>, which it does not).
// `bench` (bench/scripts/views_page.py): config {token, file, name, tool,
// calls}. Signs in, publishes <file> by dropping it on the page, and
// times it to the view showing the result of the tool's first call in
// try-it; then calls it <calls> times more, timing each answer's arrival
// (the page's resource timing) to the view showing it (the view stamps
// `data-at` with the time it did).
// Prints one JSON line of what it saw; exits 1 with the reason on failure.

import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [mode, base, chromium, shots, extra] = process.argv.slice(2);
const seen = { consoleErrors: [], cspViolations: [] };

function fail(message) {
  throw new Error(message);
}

// A click inside the view, in its current document (a handle found a
// moment before may belong to the document the view's HTML replaced).
const press = (frame, id) => frame.evaluate((i) => document.getElementById(i).click(), id);

async function frameText(frame, selector, needle, timeout = 60000) {
  await frame.waitForFunction(
    (s, n) => (document.querySelector(s)?.textContent ?? "").includes(n),
    { timeout },
    selector,
    needle,
  );
  return frame.$eval(selector, (node) => node.textContent);
}

const launch = () => puppeteer.launch({
  executablePath: chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});

/** A page of `browser`, its console heard by `listen`, opened on the
 * server and signed in with `token`. */
async function signedIn(browser, token, listen = () => {}) {
  const page = await browser.newPage();
  page.setDefaultTimeout(90000);
  await page.setViewport({ width: 1400, height: 1400 });
  listen(page);
  await page.goto(`${base}/`, { waitUntil: "load" });
  await page.type("#token", token);
  await page.click("#signin-button");
  return page;
}

async function showMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await launch();
  try {
    const page = await signedIn(browser, config.token, (page) => {
      page.on("console", (message) => {
        const text = message.text();
        if (text.includes("Content Security Policy")) seen.cspViolations.push(text);
        else if (message.type() === "error" && !text.startsWith("Failed to load resource")) seen.consoleErrors.push(text);
      });
      page.on("pageerror", (error) => seen.consoleErrors.push(`pageerror: ${error.message}`));
    });
    // Pressed in the list as it is now: the list is drawn again as tools
    // change, and a handle found a moment before may be gone.
    await page.waitForSelector(`#tools li[data-tool="${config.tool}"] button`);
    await page.evaluate((t) => document.querySelector(`#tools li[data-tool="${t}"] button`).click(), config.tool);
    await page.waitForFunction((n) => document.getElementById("try-name").textContent === n, {}, config.tool);
    // The arguments as JSON (the form's own field is the dashboard's test).
    await page.evaluate(() => {
      document.getElementById("use-raw").checked = true;
      document.getElementById("raw").value = '{"n": 4}';
    });
    await page.click("#call");
    await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
    const answered = Date.now();
    const handle = await page.waitForSelector("#result iframe.view");
    seen.sandbox = await handle.evaluate((node) => node.getAttribute("sandbox"));
    const frame = await handle.contentFrame();
    if (!frame) fail("the view's frame has no content frame");
    seen.result = await frameText(frame, "#result", "result ");
    seen.resultShownMs = Date.now() - answered;
    seen.input = await frameText(frame, "#input", "input ");
    seen.probes = await frameText(frame, "#probes", "other ");
    await press(frame, "more");
    seen.called = await frameText(frame, "#called", "called ");
    await press(frame, "reach");
    seen.outside = await frameText(frame, "#outside", "outside ");
    await press(frame, "other");
    seen.sibling = await frameText(frame, "#sibling", "sibling ");
    await press(frame, "quiet");
    seen.quiet = await frameText(frame, "#quietly", "quiet ");
    seen.frameUrl = frame.url();
    seen.tokenInPage = await page.evaluate(() => sessionStorage.getItem("toolhost-token") !== null);
    await page.screenshot({ path: path.join(shots, "view.png"), fullPage: true });
    // The view takes its frame elsewhere: the page closes it.
    await press(frame, "leave");
    await page.waitForSelector("#result .view-left");
    seen.left = await page.$eval("#result .view-left", (node) => node.textContent);
    seen.framesAfterLeaving = await page.$$eval("#result iframe.view", (nodes) => nodes.length);
  } finally {
    await browser.close();
  }
}

async function withControl(page, key) {
  await page.keyboard.down("Control");
  await page.keyboard.press(key);
  await page.keyboard.up("Control");
}

async function benchMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const source = fs.readFileSync(config.file, "utf8");
  const browser = await launch();
  try {
    const page = await signedIn(browser, config.token);
    await page.waitForFunction(() => !document.getElementById("write-section").hidden);
    // The source written in the page's editor (pasted whole), published
    // with Ctrl-S, as a person does.
    await page.select("#write-language", "python");
    await page.type("#write-name", config.name);
    await page.click("#write-new");
    await page.waitForFunction(() => document.querySelector("#editor .cm-content").textContent.length > 0);
    await page.click("#editor .cm-content");
    await withControl(page, "a");
    await page.$eval("#editor .cm-content", (node, text) => {
      const data = new DataTransfer();
      data.setData("text/plain", text);
      node.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    }, source);
    const published = await page.evaluate(() => Date.now());
    await withControl(page, "s");
    await page.waitForFunction(() => /Live in/.test(document.getElementById("write-result").textContent), { timeout: 240000 });
    await page.waitForFunction((n) => document.getElementById("try-name").textContent === n, {}, config.tool);
    const call = async () => {
      await page.evaluate(() => {
        document.getElementById("use-raw").checked = true;
        document.getElementById("raw").value = '{"n": 4}';
        performance.clearResourceTimings();
      });
      const before = await page.evaluate(() => Date.now());
      const old = await page.$("#result iframe.view");
      await page.click("#call");
      // This call's view (the last one's goes as the call is made).
      const handle = (await page.waitForFunction(
        (previous) => {
          const shown = document.querySelector("#result iframe.view");
          return shown && shown !== previous ? shown : null;
        },
        { polling: "mutation" },
        old,
      )).asElement();
      const frame = await handle.contentFrame();
      await frame.waitForFunction(
        (t) => Number(document.getElementById("result")?.dataset.at ?? 0) >= t,
        { polling: "mutation" },
        before,
      );
      const at = await frame.$eval("#result", (node) => Number(node.dataset.at));
      const answered = await page.evaluate((tool) => {
        const entry = performance.getEntriesByType("resource").filter((e) => e.name.endsWith(`/tools/${tool}`)).pop();
        return performance.timeOrigin + entry.responseEnd;
      }, config.tool);
      return { at, answered };
    };
    const first = await call();
    seen.publishToViewMs = first.at - published;
    seen.answerToViewMs = [];
    for (let i = 0; i < config.calls; i++) {
      const { at, answered } = await call();
      seen.answerToViewMs.push(Math.round(at - answered));
    }
  } finally {
    await browser.close();
  }
}

try {
  if (mode === "show") await showMode();
  else if (mode === "bench") await benchMode();
  else fail(`unknown mode ${mode}`);
  console.log(JSON.stringify(seen));
} catch (error) {
  console.log(JSON.stringify({ ...seen, failed: String(error && error.stack || error) }));
  process.exit(1);
}
