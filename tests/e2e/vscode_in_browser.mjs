// Drives code-server (VS Code in the browser) in headless Chromium through puppeteer-core and
// checks what a user sees with the memlint extension on examples/sft-llama3-h100: the squiggle
// on the right line, the hover's verdict, the budget view, and a MEM001 quick fix that edits
// run.sh and clears the finding. Screenshots go to $SHOTS. Exits non-zero on the first failure.
//
// Environment: CODE_URL (code-server, no auth), WORKSPACE (the example's copy), CHROMIUM
// (Debian's /usr/bin/chromium), SHOTS (a folder), PUPPETEER (puppeteer-core's folder).

import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const puppeteer = require(process.env.PUPPETEER);
const { CODE_URL, WORKSPACE, CHROMIUM, SHOTS } = process.env;
const TIMEOUT = 120_000;
const log = (...args) => console.log(new Date().toISOString().slice(11, 23), ...args);

async function waitForText(page, selector, text, timeout = TIMEOUT) {
  await page.waitForFunction(
    (s, t) => [...document.querySelectorAll(s)].some((e) => e.textContent.includes(t)),
    { timeout, polling: 250 }, selector, text);
}

async function command(page, name) {
  await page.keyboard.press("F1");
  await page.waitForSelector(".quick-input-widget:not([style*='display: none']) input", { timeout: TIMEOUT });
  await page.keyboard.type(name, { delay: 10 });
  await waitForText(page, ".quick-input-list .monaco-list-row", name.replace(/^>\s*/, ""));
  await page.keyboard.press("Enter");
}

async function openFile(page, name) {
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyP");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: TIMEOUT });
  await page.keyboard.type(name, { delay: 10 });
  await waitForText(page, ".quick-input-list .monaco-list-row", name);
  await page.keyboard.press("Enter");
  await waitForText(page, ".tab.active", name);
}

async function problems(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll(".markers-panel .monaco-list-row")].map((row) => row.textContent));
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, name) });
  log("screenshot", name);
}

const browser = await puppeteer.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1440,900"],
});
let failed = false;
const page = await browser.newPage();
try {
  await page.setViewport({ width: 1440, height: 900 });
  await page.goto(`${CODE_URL}/?folder=${encodeURIComponent(WORKSPACE)}`, { waitUntil: "domcontentloaded" });
  await page.waitForSelector(".monaco-workbench", { timeout: TIMEOUT });
  log("workbench up");

  // 1. train.py: the run's verdict squiggled on the line that decides it there (line 12)
  await openFile(page, "train.py");
  await page.waitForSelector(".monaco-editor .squiggly-error", { timeout: TIMEOUT });
  await command(page, "View: Focus Problems");
  await waitForText(page, ".markers-panel .monaco-list-row", "MEM001");
  const rows = await problems(page);
  log("problems", rows);
  if (!rows.some((r) => r.includes("MEM001") && r.includes("[Ln 12,"))) {
    throw new Error(`MEM001 not on train.py line 12: ${rows}`);
  }
  await shot(page, "squiggle-and-problems.png");

  // 2. the hover over the model load (line 21): the verdict first
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyJ"); // hide the panel
  await page.keyboard.up("Control");
  await page.keyboard.down("Control");
  await page.keyboard.press("KeyG");
  await page.keyboard.up("Control");
  await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: TIMEOUT });
  await page.keyboard.type("21:35", { delay: 10 });
  await page.keyboard.press("Enter");
  await command(page, "Show or Focus Hover");
  await waitForText(page, ".monaco-hover", "Does not fit on NVIDIA H100");
  const hover = await page.$eval(".monaco-hover .hover-contents, .monaco-hover", (e) => e.textContent);
  log("hover", hover.slice(0, 120));
  if (hover.indexOf("Does not fit") > hover.indexOf("component")) {
    throw new Error("the hover does not lead with the verdict");
  }
  await shot(page, "hover-verdict.png");
  await page.keyboard.press("Escape");

  // 3. the budget view (the code lens' command)
  await command(page, "memlint: Show Budget");
  const frame = await (async () => {
    const deadline = Date.now() + TIMEOUT;
    while (Date.now() < deadline) {
      for (const f of page.frames()) {
        const text = await f.evaluate(() => document.body?.textContent ?? "").catch(() => "");
        if (text.includes("Does not fit") && text.includes("Phases of a step")) {
          return f;
        }
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error("the budget view never showed the run");
  })();
  const applicable = await frame.$$eval("button[data-apply]", (b) => b.length);
  log("budget view, apply buttons:", applicable);
  await shot(page, "budget-view.png");

  // 4. the MEM001 quick fix from train.py edits run.sh (micro-batch 2, accumulation 8)
  await command(page, "View: Close All Editor Groups");
  await openFile(page, "train.py");
  const squiggle = await page.waitForSelector(".monaco-editor .squiggly-error", { timeout: TIMEOUT });
  const at = await squiggle.boundingBox();
  await page.mouse.click(at.x + at.width / 2, at.y + at.height / 2);
  await page.keyboard.down("Control");
  await page.keyboard.press("Period");
  await page.keyboard.up("Control");
  await waitForText(page, ".action-widget .monaco-list-row", "micro-batch 2 with 8x gradient accumulation");
  await shot(page, "quick-fixes.png");
  const items = await page.$$(".action-widget .monaco-list-row");
  for (const item of items) {
    if ((await item.evaluate((e) => e.textContent)).includes("micro-batch 2 with 8x")) {
      await item.click();
      break;
    }
  }
  await command(page, "File: Save All Files");
  const runSh = path.join(WORKSPACE, "run.sh");
  const deadline = Date.now() + TIMEOUT;
  while (!fs.readFileSync(runSh, "utf8").includes("--per_device_train_batch_size 2")) {
    if (Date.now() > deadline) throw new Error("run.sh was not edited");
    await new Promise((r) => setTimeout(r, 250));
  }
  if (!fs.readFileSync(runSh, "utf8").includes("--gradient_accumulation_steps 8")) {
    throw new Error("the accumulation did not change with the micro-batch");
  }
  await command(page, "View: Focus Problems");
  await page.waitForFunction(
    () => ![...document.querySelectorAll(".markers-panel .monaco-list-row")].some((r) => r.textContent.includes("MEM001")),
    { timeout: TIMEOUT, polling: 250 });
  log("MEM001 cleared after the fix");
  await shot(page, "after-fix.png");
} catch (error) {
  failed = true;
  console.error(error);
  await page.screenshot({ path: path.join(SHOTS, "failure.png") }).catch(() => {});
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
