// Drives the dashboard in Debian's chromium, headless, with puppeteer-core
// (pinned in tests/it/support; its own browser download is never used).
//
//   node dashboard.mjs open  <base> <chromium> <shots> <folder> <files.json>
//   node dashboard.mjs roles <base> <chromium> <shots> <tokens.json>
//
// `open`: a server with no tokens over <folder> (echo and a plugin whose
// tools' description is an <img onerror> payload). Checks the list, the
// payload shown as text, a plugin dropped into the folder appearing live,
// try-it (structured result, business error code, invalid arguments with
// their paths), a rejected file with its reason, publishing by drop and by
// the file input (live, and refused with the reason).
// `roles`: a server with tokens: signed out, a caller (no publish area), a
// publisher (publish area, namespace named).
// `write`: a server with tokens that builds Python and JavaScript: a
// publisher starts a tool of each language from the template, breaks it,
// publishes with Ctrl-S, sees the failing line marked, undoes, publishes
// again and tries the live tool; then reads the client panel (the
// snippets, the token shown only on a click) and loads a source back.
// `sets`: a server with tool sets and --require-approval: a caller whose
// set is the instructor's plugins sees only those (tools and plugins); an
// admin sees a held plugin with its changes and approves it on the page.
// `room`: a server that builds one source at a time: an instructor and
// three attendees, each on a page of their own. Ada publishes a source
// that needs a full build, grace and lin publish theirs behind it, and ada
// presses Ctrl-S four more times while hers builds. Counts the PUTs (one a
// save), records each attendee's status line as it changes, reads the
// queue and each place in it on the instructor's "Now" and the
// attendees', waits for every outcome, and types a docstring's quotes.
// Prints one JSON line of what it saw; exits 1 with the reason on failure.

import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [mode, base, chromium, shots, extra] = process.argv.slice(2);
const seen = { consoleErrors: [], refusedLoads: [], timings: {} };

function fail(message) {
  throw new Error(message);
}

async function launch() {
  return puppeteer.launch({
    executablePath: chromium,
    headless: true,
    // A room is several pages at once: none is slowed for being behind
    // another (a page in the background otherwise answers late or never).
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
      "--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"],
  });
}

async function openPage(browser) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 1000 });
  // Puppeteer's 30 s default is short in the whole suite on two cores,
  // where other tests build Python and JavaScript at the same time; a step
  // that never comes still fails, with its stack, after 90 s.
  page.setDefaultTimeout(90000);
  // Chromium logs every 4xx answer to fetch as a console error; those are
  // kept apart, with their URL, and the test checks each was asked for.
  page.on("console", (message) => {
    // Warnings count as errors: an invalid pattern is one.
    if (message.type() === "warn") {
      seen.consoleErrors.push(`warning: ${message.text()}`);
      return;
    }
    if (message.type() !== "error") return;
    if (message.text().startsWith("Failed to load resource: the server responded with a status of 4")) {
      const url = new URL(message.location().url || base, base);
      seen.refusedLoads.push(`${url.pathname} ${message.text().match(/status of (\d+)/)[1]}`);
    } else {
      seen.consoleErrors.push(message.text());
    }
  });
  page.on("pageerror", (error) => seen.consoleErrors.push(`pageerror: ${error.message}`));
  await page.goto(`${base}/`, { waitUntil: "load" });
  return page;
}

const text = (page, selector) => page.$eval(selector, (node) => node.textContent);

async function waitText(page, selector, needle, timeout = 10000) {
  await page.waitForFunction(
    (s, n) => [...document.querySelectorAll(s)].some((node) => node.textContent.includes(n)),
    { timeout },
    selector,
    needle,
  );
}

async function tryTool(page, name, fill) {
  await page.click(`#tools li[data-tool="${name}"] button`);
  await page.waitForFunction((n) => document.getElementById("try-name").textContent === n, {}, name);
  await fill();
  await page.evaluate(() => (document.getElementById("result").textContent = ""));
  await page.click("#call");
  await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
  return page.$eval("#result", (node) => node.textContent);
}

async function fillByLabel(page, label, value) {
  const id = await page.evaluate((l) => {
    const found = [...document.querySelectorAll("#try-fields label")].find((node) => node.textContent.replace("*", "").trim() === l);
    return found && found.getAttribute("for");
  }, label);
  if (!id) fail(`no field labelled ${label}`);
  await page.focus(`[id="${id}"]`);
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyA");
  await page.keyboard.up("Control");
  await page.keyboard.press("Backspace");
  await page.type(`[id="${id}"]`, value);
}

/// Drops a file on the element `target` (a CSS selector): the drop zone,
/// or anywhere else on the page.
async function dropFile(page, file, name, target = "#dropzone") {
  const bytes = fs.readFileSync(file).toString("base64");
  await page.evaluate((b64, fileName, selector) => {
    const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const transfer = new DataTransfer();
    transfer.items.add(new File([raw], fileName, { type: "application/wasm" }));
    const zone = document.querySelector(selector);
    zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: transfer, bubbles: true, cancelable: true }));
    zone.dispatchEvent(new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, bytes, name, target);
}

async function openMode() {
  const files = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await launch();
  try {
    const page = await openPage(browser);
    await page.waitForSelector('#tools li[data-tool="echo"]');
    await waitText(page, "#status", "Live");
    seen.signInShownOnOpenServer = await page.$eval("#signin", (node) => node.offsetParent !== null);
    seen.listed = await page.$$eval("#tools li[data-tool]", (items) => items.map((item) => item.dataset.tool));

    // The payload is text: no <img> was made, nothing ran.
    await waitText(page, '#tools li[data-tool="ok"] .description', "<img");
    seen.payloadShownAsText = await text(page, '#tools li[data-tool="ok"] .description');
    seen.imagesInPage = await page.$$eval("img", (images) => images.length);
    seen.payloadRan = await page.evaluate(() => window.__xss === 1);

    // A plugin dropped into the folder appears, with no reload.
    const before = Date.now();
    fs.copyFileSync(files.math, path.join(files.folder, ".math.wasm.tmp"));
    fs.renameSync(path.join(files.folder, ".math.wasm.tmp"), path.join(files.folder, "math.wasm"));
    await page.waitForSelector('#tools li[data-tool="add"]', { timeout: 2000 });
    seen.timings.dropToListedMs = Date.now() - before;
    await page.waitForSelector('#plugins tr[data-plugin="math"]');

    // Filter.
    await page.type("#filter", "divide");
    seen.filtered = await page.$$eval("#tools li[data-tool]", (items) => items.map((item) => item.dataset.tool));
    await page.focus("#filter");
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyA");
    await page.keyboard.up("Control");
    await page.keyboard.press("Backspace");
    await page.waitForSelector('#tools li[data-tool="echo"]');

    // Try it: structured output, a business error, invalid arguments.
    seen.structured = await tryTool(page, "add", async () => {
      await fillByLabel(page, "a", "2");
      await fillByLabel(page, "b", "3");
    });
    seen.structuredPre = await text(page, "#result .structured");
    seen.business = await tryTool(page, "divide", async () => {
      await fillByLabel(page, "a", "1");
      await fillByLabel(page, "b", "0");
    });
    seen.businessCode = await text(page, "#result .error-code");
    seen.invalid = await tryTool(page, "add", async () => {
      await fillByLabel(page, "a", "2");
    });
    seen.invalidCode = await text(page, "#result .error-code");
    seen.invalidDetails = await text(page, "#result .error-details");
    seen.echo = await tryTool(page, "echo", async () => {
      await fillByLabel(page, "text", "hello from chromium");
    });
    await page.screenshot({ path: path.join(shots, "dashboard-try.png"), fullPage: true });

    // A rejected file, with its reason.
    fs.writeFileSync(path.join(files.folder, ".broken.wasm.tmp"), "not a component");
    fs.renameSync(path.join(files.folder, ".broken.wasm.tmp"), path.join(files.folder, "broken.wasm"));
    await waitText(page, '#plugins tr[data-plugin="broken"] .reason', "WebAssembly");
    seen.rejectedRow = await text(page, '#plugins tr[data-plugin="broken"]');

    // Publishing: the file input (live), a drop (live), a drop refused.
    const input = await page.$("#file");
    await input.uploadFile(files.conformance);
    await waitText(page, "#publish-result", "Live in", 60000);
    seen.publishedByInput = await text(page, "#publish-result");
    // Dropped on the page's heading, outside the drop zone: still published.
    await dropFile(page, files.weather, "weather.wasm", "h1");
    await waitText(page, "#publish-result", "weather", 60000);
    await waitText(page, "#publish-result", "Live in", 60000);
    seen.publishedByDrop = await text(page, "#publish-result");
    await page.type("#publish-name", "echo_again");
    await dropFile(page, files.echoVariant, "echo-variant.wasm");
    await waitText(page, "#publish-result", "Refused", 60000);
    seen.refusedDrop = await text(page, "#publish-result");
    // The refused upload left no file and no row, but the page keeps it.
    await waitText(page, "#rejections", "echo_again", 10000);
    seen.rejections = await text(page, "#rejections");
    await page.waitForSelector('#tools li[data-tool="get_weather_forecast"]', { timeout: 5000 }).catch(() => {});
    seen.listedAfter = await page.$$eval("#tools li[data-tool]", (items) => items.map((item) => item.dataset.tool));

    // Keyboard: Tab from the top reaches the filter and the Try buttons.
    await page.focus("#large-type");
    const reached = new Set();
    for (let i = 0; i < 12; i++) {
      await page.keyboard.press("Tab");
      reached.add(await page.evaluate(() => document.activeElement.id || document.activeElement.getAttribute("aria-label") || document.activeElement.tagName));
    }
    seen.keyboardReached = [...reached];
    // Every control has a label.
    seen.unlabelled = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea")]
        .filter((c) => c.type !== "hidden" && !c.labels?.length && !c.getAttribute("aria-label") && !c.getAttribute("aria-labelledby"))
        .map((c) => c.id || c.name || c.outerHTML.slice(0, 60)));

    // Activity, from the server's call summaries (every 5 s at most).
    // A plugin's own codes count as one outcome (no plugin makes up labels).
    await waitText(page, "#activity tbody", "TOOL_ERROR", 12000);
    seen.activity = await page.$$eval("#activity tbody tr", (rows) => rows.map((row) => [...row.cells].map((c) => c.textContent)));

    await page.click("#large-type");
    await page.screenshot({ path: path.join(shots, "dashboard-large.png"), fullPage: true });
    await page.click("#large-type");
    await page.screenshot({ path: path.join(shots, "dashboard.png"), fullPage: false });
    await page.close();
  } finally {
    await browser.close();
  }
}

async function rolesMode() {
  const tokens = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await launch();
  try {
    const page = await openPage(browser);
    await waitText(page, "#who", "needs a token");
    seen.signedOut = await text(page, "#who");
    seen.publishHiddenSignedOut = await page.$eval("#publish-section", (node) => node.hidden);
    seen.toolsSignedOut = await text(page, "#tools");
    const signIn = async (token) => {
      await page.type("#token", token);
      await page.click("#signin-button");
    };
    await signIn(tokens.caller);
    await waitText(page, "#who", "Signed in as");
    await page.waitForSelector('#tools li[data-tool="echo"]');
    seen.caller = await text(page, "#who");
    seen.tokenFieldShownSignedIn = await page.$eval("#token", (node) => node.offsetParent !== null);
    seen.publishHiddenForCaller = await page.$eval("#publish-section", (node) => node.hidden && node.offsetParent === null);
    await page.screenshot({ path: path.join(shots, "dashboard-caller.png") });
    await page.click("#signout");
    await waitText(page, "#who", "needs a token");
    await signIn(tokens.publisher);
    await waitText(page, "#who", "publisher");
    seen.publisher = await text(page, "#who");
    seen.publishHiddenForPublisher = await page.$eval("#publish-section", (node) => node.hidden);
    seen.publishWhere = await text(page, "#publish-where");
    // The token stays in this tab's session only.
    seen.tokenInSession = await page.evaluate(() => sessionStorage.getItem("toolhost-token") !== null);
    seen.tokenInLocal = await page.evaluate(() => Object.keys(localStorage).some((k) => (localStorage.getItem(k) || "").includes("secret")));
    await page.close();
  } finally {
    await browser.close();
  }
}

async function setsMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await launch();
  try {
    const page = await openPage(browser);
    const signIn = async (token) => {
      await page.type("#token", token);
      await page.click("#signin-button");
      await waitText(page, "#who", "Signed in as");
    };
    const listed = () => page.$$eval("#tools li[data-tool]", (items) => items.map((item) => item.dataset.tool).sort());
    const rows = () => page.$$eval("#plugins tr[data-plugin]", (items) => items.map((item) => item.dataset.plugin).sort());
    await signIn(config.caller);
    await page.waitForSelector(`#tools li[data-tool="${config.callerSees}"]`);
    await page.waitForSelector(`#plugins tr[data-plugin]`);
    seen.callerTools = await listed();
    seen.callerPlugins = await rows();
    await page.click("#signout");
    await waitText(page, "#who", "needs a token");
    await signIn(config.admin);
    const held = `#plugins tr[data-plugin="${config.held}"]`;
    await page.waitForSelector(`${held} td.state-pending`);
    seen.heldChanges = await text(page, `${held} ul.changes`);
    await page.screenshot({ path: path.join(shots, "dashboard-held.png") });
    await page.click(`${held} button[data-decide="approve"]`);
    // The status says "Approved" until the load event that follows
    // replaces it; the row turning loaded is what counts.
    try {
      await page.waitForSelector(`${held} td.state-loaded`);
    } catch (error) {
      fail(`the approved plugin never showed loaded; status: ${await text(page, "#status")}`);
    }
    await page.waitForSelector(`#tools li[data-tool="${config.approvedTool}"]`);
    seen.adminTools = await listed();
    await page.close();
  } finally {
    await browser.close();
  }
}

/// Presses `key` with Ctrl held.
async function withControl(page, key) {
  await page.keyboard.down("Control");
  await page.keyboard.press(key);
  await page.keyboard.up("Control");
}

const editorText = (page) => page.$eval("#editor .cm-content", (node) => node.textContent);

async function writeMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  const browser = await launch();
  try {
    const page = await openPage(browser);
    await waitText(page, "#who", "needs a token");
    await page.type("#token", config.publisher);
    await page.click("#signin-button");
    await waitText(page, "#who", "publisher");
    await page.waitForFunction(() => !document.getElementById("write-section").hidden);
    seen.languages = await page.$$eval("#write-language option", (nodes) => nodes.map((node) => node.value));
    const cases = [
      // (The editor closes brackets as they are typed: the breaks are not
      // brackets.)
      ["python", "greeter_py", "\nbroken = 1 +\n"],
      ["js", "greeter_js", "\nconst broken = 1 +;\n"],
    ];
    for (const [language, name, broken] of cases) {
      await page.select("#write-language", language);
      await page.$eval("#write-name", (node) => (node.value = ""));
      await page.type("#write-name", name);
      await page.click("#write-new");
      // This language's template (fetched as the page asks for it), not
      // the last one's still in the editor: its header names the tool.
      await page.waitForFunction(
        (n) => {
          const text = document.querySelector("#editor .cm-content").textContent;
          return text.includes("Greets someone") && text.includes(`${n}: a tool you write in this page`);
        },
        {},
        name,
      );
      // Break it at its end, and publish with the keyboard.
      await page.click("#editor .cm-content");
      await withControl(page, "End");
      await page.keyboard.type(broken, { delay: 5 });
      // The line typed: the one before the last (the break ends with a newline).
      seen[`${language}BrokenLine`] = await page.$eval("#editor .cm-editor", (node) => Number(node.dataset.lines) - 1);
      await withControl(page, "s");
      await page.waitForFunction(() => /Not live/.test(document.getElementById("write-result").textContent), { timeout: 240000 });
      seen[`${language}Failed`] = await text(page, "#write-result");
      seen[`${language}MarkedLine`] = await page.$eval("#editor .cm-editor", (node) => node.getAttribute("data-error-line"));
      seen[`${language}Marks`] = await page.$$eval("#editor .cm-lintRange-error, #editor .cm-lint-marker-error", (nodes) => nodes.length);
      await page.screenshot({ path: path.join(shots, `dashboard-write-${language}-failed.png`) });
      // Undo the break, publish again: live, and open in try-it.
      for (let i = 0; i < 30 && (await page.$eval("#editor .cm-content", (node) => node.textContent.includes("broken"))); i++) {
        await withControl(page, "z");
      }
      await withControl(page, "s");
      await page.waitForFunction(() => /Live in/.test(document.getElementById("write-result").textContent), { timeout: 240000 });
      seen[`${language}Live`] = await text(page, "#write-result");
      const tool = `${config.namespace}__${name}`;
      await page.waitForFunction((n) => document.getElementById("try-name").textContent === n, {}, tool);
      await fillByLabel(page, "name", "Ada");
      await page.evaluate(() => (document.getElementById("result").textContent = ""));
      await page.click("#call");
      await page.waitForFunction(() => /HTTP \d+/.test(document.getElementById("result").textContent));
      seen[`${language}Tried`] = await text(page, "#result");
    }
    await page.screenshot({ path: path.join(shots, "dashboard-write-live.png") });

    // The client panel: every snippet, the token hidden until asked for.
    await page.waitForFunction(() => !document.getElementById("connect-section").hidden);
    const snippets = () => page.$$eval("pre.snippet", (nodes) => nodes.map((node) => ({ id: node.dataset.snippet, format: node.dataset.format, text: node.textContent })));
    seen.mcpUrl = await text(page, "#connect-url");
    seen.headerBefore = await text(page, "#connect-header");
    seen.snippetsBefore = await snippets();
    await page.click("#connect-reveal");
    seen.headerShown = await text(page, "#connect-header");
    seen.snippets = await snippets();
    seen.pageUrl = page.url();

    // One of their own source-built plugins loads back into the editor.
    await page.select("#write-language", "js");
    await page.click("#write-new");
    const row = `#plugins tr[data-plugin="${config.namespace}/greeter_py"] button`;
    await page.waitForSelector(row);
    await page.click(row);
    await page.waitForFunction(() => /source .* serves from/.test(document.getElementById("write-status").textContent));
    seen.editedLanguage = await page.$eval("#write-language", (node) => node.value);
    seen.editedName = await page.$eval("#write-name", (node) => node.value);
    seen.editedHasTool = (await editorText(page)).includes("greeter_py");
    await page.close();
  } finally {
    await browser.close();
  }
}

/// Records every text `selector` shows, in order, into window.__said.
async function recordStatus(page, selector) {
  await page.evaluate((s) => {
    window.__said = [];
    const node = document.querySelector(s);
    new MutationObserver(() => window.__said.push(node.textContent)).observe(node, { childList: true, characterData: true, subtree: true });
  }, selector);
}

async function signInAs(page, token, role) {
  await waitText(page, "#who", "needs a token");
  await page.type("#token", token);
  await page.click("#signin-button");
  await waitText(page, "#who", role);
}

/// Writes `source` as tool `name` in the page's editor (Python).
async function writeSource(page, name, source) {
  seen.step = `writing ${name}`;
  await page.bringToFront();
  await page.waitForFunction(() => !document.getElementById("write-section").hidden);
  await page.select("#write-language", "python");
  seen.step = `writing ${name}: the name`;
  await page.$eval("#write-name", (node) => (node.value = ""));
  await page.type("#write-name", name);
  seen.step = `writing ${name}: the template`;
  await page.click("#write-new");
  await page.waitForFunction(() => document.querySelector("#editor .cm-content").textContent.includes("Greets someone"));
  seen.step = `writing ${name}: the source`;
  // The whole template replaced by the source, as a paste would (text
  // inserted at once: no auto-indent, no closing brackets).
  await page.click("#editor .cm-content");
  await withControl(page, "a");
  await page.keyboard.sendCharacter(source);
  await page.waitForFunction((n) => document.querySelector("#editor .cm-editor").dataset.lines === String(n), {}, source.split("\n").length);
}

async function roomMode() {
  const config = JSON.parse(fs.readFileSync(extra, "utf8"));
  // A browser each, as on their own laptops: a page behind another in one
  // browser is throttled, and the room would not be live on it.
  const browsers = [];
  try {
    const pages = {};
    const puts = {};
    for (const person of ["instructor", "ada", "grace", "lin"]) {
      const browser = await launch();
      browsers.push(browser);
      const page = await openPage(browser);
      puts[person] = 0;
      page.on("request", (request) => {
        if (request.method() === "PUT" && request.url().includes("/plugins/")) puts[person] += 1;
      });
      await page.bringToFront();
      await signInAs(page, config.tokens[person], person === "instructor" ? "admin" : "publisher");
      pages[person] = page;
    }
    seen.adaWho = await text(pages.ada, "#who");
    for (const person of ["ada", "grace", "lin"]) {
      await writeSource(pages[person], "slow", config.sources[person]);
      await recordStatus(pages[person], "#write-status");
    }
    seen.step = "ada's first save";
    // Ada's first save: her build takes the one slot.
    await pages.ada.bringToFront();
    await pages.ada.click("#editor .cm-content");
    await withControl(pages.ada, "s");
    await pages.ada.waitForFunction(() => /Building/.test(document.getElementById("write-status").textContent), { timeout: 120000, polling: 200 });
    seen.step = "grace and lin publish";
    // Grace and lin publish behind it.
    for (const person of ["grace", "lin"]) {
      await pages[person].bringToFront();
      await pages[person].click("#editor .cm-content");
      await withControl(pages[person], "s");
      await pages[person].waitForFunction(() => /Queued/.test(document.getElementById("write-status").textContent), { timeout: 60000, polling: 200 });
    }
    // Ada saves four more times while hers builds, an edit before each.
    // Her fourth save's request is held back in the browser for 1.5 s: the
    // network may deliver a page's requests in any order, and her fifth
    // save must still be the one that stays.
    await pages.ada.bringToFront();
    await pages.ada.click("#editor .cm-content");
    await pages.ada.setRequestInterception(true);
    const holdFourth = (request) => {
      const publish = request.headers()["toolhost-publish"] || "";
      if (request.method() === "PUT" && publish.endsWith("-4")) {
        setTimeout(() => request.continue(), 1500);
      } else {
        request.continue();
      }
    };
    pages.ada.on("request", holdFourth);
    for (let i = 2; i <= 5; i++) {
      await pages.ada.keyboard.press("End");
      await pages.ada.keyboard.type(`  # edit ${i}`);
      await withControl(pages.ada, "s");
    }
    seen.step = "the queue";
    // The queue, as the instructor and the attendees see it.
    const rows = (page) => page.$$eval("#publishes tbody tr", (trs) => trs.map((tr) => ({ plugin: tr.dataset.plugin, outcome: tr.dataset.outcome, text: tr.textContent })));
    try {
      await pages.instructor.waitForFunction(() => document.querySelectorAll('#publishes tr[data-outcome="queued"]').length >= 3, { timeout: 60000, polling: 200 });
    } catch (error) {
      seen.instructorNow = await rows(pages.instructor);
      throw error;
    }
    seen.instructorNow = await rows(pages.instructor);
    seen.instructorHeader = await text(pages.instructor, "#waiting");
    seen.linNow = await rows(pages.lin);
    seen.linStatus = await text(pages.lin, "#write-status");
    await pages.instructor.screenshot({ path: path.join(shots, "room-now.png"), fullPage: true });
    seen.step = "every outcome";
    // Every outcome.
    for (const person of ["ada", "grace", "lin"]) {
      await pages[person].waitForFunction(() => /Live in|Not live/.test(document.getElementById("write-result").textContent), { timeout: 400000, polling: 200 });
    }
    for (const person of ["ada", "grace", "lin"]) {
      seen[`${person}Result`] = await text(pages[person], "#write-result");
      seen[`${person}ResultPublish`] = await pages[person].$eval("#write-result [data-publish]", (node) => node.dataset.publish);
      seen[`${person}Said`] = await pages[person].evaluate(() => window.__said);
      seen[`${person}StatusAfter`] = await text(pages[person], "#write-status");
    }
    seen.puts = puts;
    await pages.instructor.waitForFunction(() => !document.querySelector('#publishes tr[data-outcome="queued"], #publishes tr[data-outcome="building"]'), { timeout: 60000, polling: 200 });
    seen.instructorAfter = await rows(pages.instructor);
    seen.instructorHeaderAfter = await text(pages.instructor, "#waiting");
    // A docstring typed into the editor keeps its three quotes.
    await pages.grace.bringToFront();
    await pages.grace.click("#editor .cm-content");
    await withControl(pages.grace, "End");
    await pages.grace.keyboard.type('\ndef f():\n"""one line."""', { delay: 5 });
    seen.typedDocstring = (await editorText(pages.grace)).includes('"""one line."""') && !(await editorText(pages.grace)).includes('"""one line.""""');
    await pages.ada.screenshot({ path: path.join(shots, "room-ada.png"), fullPage: true });
  } finally {
    for (const browser of browsers) await browser.close();
  }
}

try {
  if (mode === "open") await openMode();
  else if (mode === "roles") await rolesMode();
  else if (mode === "write") await writeMode();
  else if (mode === "sets") await setsMode();
  else if (mode === "room") await roomMode();
  else fail(`unknown mode ${mode}`);
  console.log(JSON.stringify(seen));
} catch (error) {
  console.log(JSON.stringify({ ...seen, failed: String(error && error.stack || error) }));
  process.exit(1);
}
