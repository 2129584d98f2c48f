// The page as a host for what a tool asks, in Debian's chromium, headless,
// with puppeteer-core (pinned in tests/it/support).
//
//   node asks_page.mjs asks <base> <chromium> <shots> <config.json>
//
// config: {token, ask, sample, task}. Signs in with <token>; calls <ask> (a tool
// that asks for a name and a time) in try-it, answers its form and reads
// the result; calls <sample> (a tool asking for a model's reply) and writes
// the reply; runs <task> (a task tool that asks for a title, then works)
// and records each status the page shows, answers its form, reads the
// result; runs it again and cancels it while it asks.
// Prints one JSON line of what it saw; exits 1 with the reason on failure.

import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [mode, base, chromium, shots, extra] = process.argv.slice(2);
const seen = { consoleErrors: [] };

function fail(message) {
  throw new Error(message);
}

async function call(page, tool, args) {
  // Pressed in the list as it is now (the list is drawn again as tools
  // change; a handle found a moment before may be gone).
  await page.waitForSelector(`#tools li[data-tool="${tool}"] button`);
  await page.evaluate((t) => document.querySelector(`#tools li[data-tool="${t}"] button`).click(), tool);
  await page.waitForFunction((n) => document.getElementById("try-name").textContent === n, {}, tool);
  await page.evaluate((a) => {
    document.getElementById("use-raw").checked = true;
    document.getElementById("raw").value = JSON.stringify(a);
  }, args);
  await page.click("#call");
}

/** Fills the form of the request shown, and presses `action`. */
async function answer(page, values, action) {
  const form = "#result fieldset.ask";
  await page.waitForSelector(form);
  const message = await page.$eval(`${form} .ask-message`, (node) => node.textContent);
  for (const [label, value] of Object.entries(values)) {
    const id = await page.$eval(form, (box, l) => {
      const found = [...box.querySelectorAll("label")].find((node) => node.textContent.replace("*", "").trim() === l);
      return found && found.getAttribute("for");
    }, label);
    if (!id) fail(`no field labelled ${label} in the form`);
    const tag = await page.$eval(`[id="${id}"]`, (node) => node.tagName);
    if (tag === "SELECT") {
      // Options are valued by index; the person picks the one reading `value`.
      const index = await page.$eval(`[id="${id}"]`, (node, v) => [...node.options].find((o) => o.textContent === v)?.value, value);
      if (index === undefined) fail(`no option ${value} in ${label}`);
      await page.select(`[id="${id}"]`, index);
    }
    else await page.type(`[id="${id}"]`, value);
  }
  await page.click(`${form} button[data-action="${action}"]`);
  return message;
}

async function asksMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(90000);
    await page.setViewport({ width: 1400, height: 1400 });
    page.on("console", (message) => {
      if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) seen.consoleErrors.push(message.text());
    });
    page.on("pageerror", (error) => seen.consoleErrors.push(`pageerror: ${error.message}`));
    await page.goto(`${base}/`, { waitUntil: "load" });
    await page.type("#token", config.token);
    await page.click("#signin-button");
    await page.waitForSelector(`#tools li[data-tool="${config.ask}"] button`);

    // An elicitation, answered through its form.
    await call(page, config.ask, { guests: 2 });
    seen.asked = await answer(page, { name: "Ada", time: "20:30" }, "accept");
    await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
    seen.booked = await page.$eval("#result .text-content", (node) => node.textContent);
    // Declined: the tool is told so.
    await call(page, config.ask, { guests: 3 });
    await answer(page, {}, "decline");
    await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
    seen.declined = await page.$eval("#result .text-content", (node) => node.textContent);

    // A sampling request, answered by hand.
    await call(page, config.sample, { topic: "rain" });
    await page.waitForSelector('#result fieldset.ask[data-method="sampling/createMessage"]');
    seen.sampled = await page.$eval("#result fieldset.ask p", (node) => node.textContent);
    await page.type("#result fieldset.ask textarea", "Soft rain on the roof");
    await page.click('#result fieldset.ask button[data-action="send"]');
    await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
    seen.haiku = await page.$eval("#result .text-content", (node) => node.textContent);

    // A task: each status the page shows, its question, its result.
    await page.evaluate(() => {
      window.__statuses = [];
      new MutationObserver(() => {
        const shown = document.querySelector("#result .task-status")?.dataset.status;
        if (shown && window.__statuses.at(-1) !== shown) window.__statuses.push(shown);
      }).observe(document.getElementById("result"), { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await call(page, config.task, { size: 200000 });
    seen.taskAsked = await answer(page, { title: "Squares" }, "accept");
    await page.waitForSelector("#result .task-ended");
    seen.taskEnded = await page.$eval("#result .task-ended", (node) => node.dataset.status);
    seen.taskStatuses = await page.evaluate(() => window.__statuses);
    seen.taskResult = await page.$eval("#result .structured", (node) => JSON.parse(node.textContent));
    await page.screenshot({ path: path.join(shots, "asks-task.png"), fullPage: true });

    // Cancelled while it waits for its question's answer.
    await call(page, config.task, { size: 10 });
    await page.waitForSelector("#result fieldset.ask");
    await page.click("#task-cancel");
    await page.waitForSelector("#result .task-ended");
    seen.cancelled = await page.$eval("#result .task-ended", (node) => node.dataset.status);
  } finally {
    await browser.close();
  }
}

try {
  if (mode === "asks") await asksMode();
  else fail(`unknown mode ${mode}`);
  console.log(JSON.stringify(seen));
} catch (error) {
  console.log(JSON.stringify({ ...seen, failed: String(error && error.stack || error) }));
  process.exit(1);
}
