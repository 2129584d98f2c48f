// A person's skills on the page, in Debian's chromium, headless, with
// puppeteer-core (pinned in tests/it/support).
//
//   node skills_page.mjs show <base> <chromium> <shots> <config.json>
//
// config: {token, other, skill, text, publish: {path, body}}. Signs in
// with <token> and waits for <skill> (a URI) in the Skills list; opens it
// and reads its SKILL.md shown as text (it holds <text>, and a `<b>` in it
// stays text); publishes one more skill over REST from the page's own
// origin (as curl would) and times it to the list showing it, heard from
// the feed's `skills` event; then signs in as <other> and lists what they
// see there. Prints one JSON line; exits 1 with the reason on failure.

import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [mode, base, chromium, shots, extra] = process.argv.slice(2);
const seen = { consoleErrors: [] };

async function signedIn(browser, token) {
  const page = await browser.newPage();
  page.setDefaultTimeout(60000);
  await page.setViewport({ width: 1400, height: 1600 });
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      seen.consoleErrors.push(message.text());
    }
  });
  page.on("pageerror", (error) => seen.consoleErrors.push(`pageerror: ${error.message}`));
  await page.goto(`${base}/`, { waitUntil: "load" });
  await page.type("#token", token);
  await page.click("#signin-button");
  return page;
}

const listed = (page) => page.$$eval("#skills li[data-skill]", (items) => items.map((item) => item.dataset.skill));

async function show() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await signedIn(browser, config.token);
    const item = `#skills li[data-skill="${config.skill}"]`;
    await page.waitForSelector(item);
    seen.description = await page.$eval(`${item} .description`, (node) => node.textContent);
    await page.evaluate((s) => { document.querySelector(`${s} details`).open = true; }, item);
    await page.waitForFunction((s, t) => (document.querySelector(`${s} .skill-text`)?.textContent ?? "").includes(t), {}, item, config.text);
    seen.text = await page.$eval(`${item} .skill-text`, (node) => node.textContent);
    seen.elementsInText = await page.$eval(`${item} .skill-text`, (node) => node.children.length);
    const started = Date.now();
    seen.published = await page.evaluate(async (p, token) => {
      const response = await fetch(p.path, {
        method: "PUT",
        headers: { "Content-Type": "text/markdown", Authorization: `Bearer ${token}` },
        body: p.body,
      });
      return response.status;
    }, config.publish, config.token);
    await page.waitForSelector(`#skills li[data-skill="${config.publish.uri}"]`);
    seen.publishToListMs = Date.now() - started;
    seen.mine = await listed(page);
    await page.screenshot({ path: path.join(shots, "skills.png"), fullPage: true });
    const other = await signedIn(browser, config.other);
    await other.waitForSelector("#skills li");
    // Its list is drawn: the note that there is none, or its own.
    await other.waitForFunction(() => document.querySelectorAll("#skills li").length > 0);
    seen.others = await listed(other);
  } finally {
    await browser.close();
  }
}

try {
  if (mode === "show") await show();
  else throw new Error(`unknown mode ${mode}`);
  console.log(JSON.stringify(seen));
} catch (error) {
  console.log(JSON.stringify({ ...seen, failed: String(error && error.stack || error) }));
  process.exit(1);
}
