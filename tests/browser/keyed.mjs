// The dashboard against a server that needs API keys: the page asks for a
// key, keeps it in the tab's session storage only, lists and submits with
// a key that may submit, and refuses plainly with a key that may only read.
//
//   node tests/browser/keyed.mjs http://127.0.0.1:PORT OUT_DIR SUBMIT_KEY READ_KEY
//
// Both keys belong to one tenant. CHROMIUM names the browser (default:
// chromium). Exits non-zero on the first failed check, after saving a
// screenshot of what the page showed.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Browser } from "./cdp.mjs";
import { batchFinished, check, fillForm, rows, shooter, submitThroughForm } from "./steps.mjs";

const [base, out, submitKey, readKey] = process.argv.slice(2);
if (!base || !out || !submitKey || !readKey) {
  console.error("usage: keyed.mjs SERVER_URL OUT_DIR SUBMIT_KEY READ_KEY");
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const shot = shooter(out);
const profile = mkdtempSync(join(tmpdir(), "mcq-dashboard-keyed-"));
const browser = Browser.launch(process.env.CHROMIUM || "chromium", profile);

// Answers the browser logs as failed loads that this test expects: the
// 401s before a key is entered, the 403s of what a tenant's key may not
// see (every tenant's workers and queue) or do (a read key submitting),
// and the 404 of the page's probe for a batch nobody has.
function expected(url, text) {
  const path = new URL(url).pathname;
  return /\b401\b/.test(text) ||
    (/\b403\b/.test(text) && ["/v1/workers", "/v1/queue", "/v1/batches"].includes(path)) ||
    (path === "/v1/batches/00000000-0000-0000-0000-000000000000" && /\b404\b/.test(text));
}

async function openTab() {
  const page = await browser.newPage();
  page.allowed = expected;
  await page.start();
  return page;
}

const dialogOpen = "document.getElementById('key-dialog').open";

// Enters `key` in the key dialog the page shows.
async function enterKey(page, key) {
  await page.waitFor(dialogOpen, "the key dialog");
  await page.type("#key-input", key);
  await page.click("#key-use");
}

// No stored trace of `key` outside the tab's session storage.
async function keptInSessionOnly(page, key) {
  const where = await page.eval(`(() => {
    const key = ${JSON.stringify(key)};
    const local = Object.keys(localStorage).filter((k) => (localStorage.getItem(k) || "").includes(key));
    return { session: sessionStorage.getItem("mcq.key") === key, local, cookie: document.cookie };
  })()`);
  check(where.session, "the key is in the tab's session storage");
  check(where.local.length === 0 && where.cookie === "", `the key is in no local storage and no cookie (${JSON.stringify(where)})`);
}

const pages = [];
try {
  const page = await openTab();
  pages.push(page);
  await page.viewport(1280, 800, false);
  console.log("a key that may submit");
  await page.goto(`${base}/#/`);
  await page.waitFor(dialogOpen, "the page to ask for a key");
  check(await page.eval("sessionStorage.getItem('mcq.key') === null"), "no key stored before one is entered");
  await shot(page, "keyed-prompt-desktop");

  // A made-up key is refused, and the dialog says so and stays.
  await enterKey(page, `mcq_0000000000000000_${"0".repeat(64)}`);
  const refused = await page.waitFor(`${dialogOpen} && !document.getElementById('key-error').hidden &&
    document.getElementById('key-error').textContent`, "the made-up key to be refused");
  check(/refused/.test(refused), `a made-up key is refused: "${refused}"`);

  await enterKey(page, submitKey);
  await page.waitFor(`!${dialogOpen} && !!document.querySelector('#batches-table')`, "the batches list after the key");
  await keptInSessionOnly(page, submitKey);
  const shown = await page.eval("document.getElementById('key-button').textContent");
  check(shown.includes(submitKey.split("_")[1]) && !shown.includes(submitKey.split("_")[2]),
    `the header names the key by its public id only (${shown})`);

  const id = await submitThroughForm(page, base, { "f-runs": "20000", "f-count": "6", "f-label": "keyed browser test: 6 calls" });
  await batchFinished(page, 6);
  await page.goto(`${base}/#/`);
  await page.waitFor(`[...document.querySelectorAll('#batches-table tbody tr')].some((r) => r.dataset.id === ${JSON.stringify(id)})`, "the batch in the list");
  check(true, "the batch submitted with the key is listed");
  await shot(page, "keyed-batches-desktop");

  // Session storage lasts as long as the tab: a reload keeps the key.
  await page.reload();
  await page.waitFor(`${rows("#batches-table")} >= 1 && [...document.querySelectorAll('#batches-table tbody tr')].some((r) => r.dataset.id === ${JSON.stringify(id)})`, "the list after a reload");
  check(!(await page.eval(dialogOpen)), "a reload lists the batches without asking again");

  // A new tab has a session of its own: it asks again.
  console.log("a key that may only read, in another tab");
  const reader = await openTab();
  pages.push(reader);
  for (const size of [{ name: "desktop", width: 1280, height: 800, mobile: false }, { name: "phone", width: 390, height: 844, mobile: true }]) {
    await reader.viewport(size.width, size.height, size.mobile);
    if (size.name === "desktop") {
      await reader.goto(`${base}/#/`);
      check(await reader.eval("sessionStorage.getItem('mcq.key') === null"), "the new tab starts without a key");
      await enterKey(reader, readKey);
      await reader.waitFor(`[...document.querySelectorAll('#batches-table tbody tr')].some((r) => r.dataset.id === ${JSON.stringify(id)})`, "the tenant's batch for the read key");
      check(true, "the read key sees its tenant's batch");
      await keptInSessionOnly(reader, readKey);
    }
    await fillForm(reader, base, { "f-runs": "20000", "f-count": "2", "f-label": "keyed browser test: read key" });
    await reader.click("#submit-button");
    const refusal = await reader.waitFor(`(() => { const e = document.getElementById('submit-errors');
      return !e.hidden && e.classList.contains('refusal') && e.textContent; })()`, "the form to refuse the read key");
    check(/may only read/.test(refusal) && /submit role/.test(refusal), `the form refuses plainly: "${refusal.slice(0, 120)}…"`);
    check(await reader.eval("/#\\/submit$/.test(location.hash) && !!document.querySelector('#submit-change-key')"),
      "the form stays, with a way to use another key");
    await shot(reader, `keyed-readonly-submit-${size.name}`);
  }
  await reader.viewport(1280, 800, false);
  await reader.goto(`${base}/#/`);
  await reader.waitFor(`${rows("#batches-table")} >= 1 && !document.querySelector('#batches-table td.empty')`, "the list");
  const batches = await reader.eval("[...document.querySelectorAll('#batches-table tbody tr')].map((r) => r.dataset.id)");
  check(batches.length === 1 && batches[0] === id, `the read key's refusals enqueued nothing (${batches.length} batch listed)`);

  // What only an admin sees says so instead of failing.
  await reader.goto(`${base}/#/workers`);
  const workers = await reader.waitFor("(document.querySelector('#workers-table td.empty') || {}).textContent", "the workers view");
  check(/admin key/.test(workers), `the workers view explains the admin role: "${workers}"`);
  await reader.goto(`${base}/#/queue`);
  await reader.waitFor("document.querySelectorAll('#chart-queue polygon.area').length >= 1 && /admin key/.test(document.querySelector('#view').textContent)",
    "the queue view counted over the tenant's batches", 30000);
  check(true, "the queue view counts the tenant's own batches and says why");
  await shot(reader, "keyed-queue-desktop");

  for (const p of pages) {
    check(p.errors.length === 0, `no script error, CSP violation or unexpected failed request${p.errors.length ? `:\n${p.errors.join("\n")}` : ""}`);
  }
  console.log("dashboard with keys: every check passed");
} catch (error) {
  console.error(`dashboard with keys: FAIL: ${error.message}`);
  for (const [i, page] of pages.entries()) {
    if (page.errors.length) console.error(`page errors:\n${page.errors.join("\n")}`);
    try {
      await shot(page, `keyed-failure-${i}`);
      console.error(await page.eval("document.body.innerText.slice(0, 2000)"));
    } catch (_) { /* the page is gone */ }
  }
  process.exitCode = 1;
} finally {
  await browser.close();
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (err) {
    console.error(`browser test: could not remove ${profile}: ${err.message}`);
  }
}
