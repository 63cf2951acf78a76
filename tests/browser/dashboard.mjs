// The dashboard in a real browser: submit batches through the form, wait
// for them, and check every view's table rows and charts at a desktop and
// a phone size, saving a screenshot of each view.
//
//   node tests/browser/dashboard.mjs http://127.0.0.1:PORT OUT_DIR
//
// CHROMIUM names the browser (default: chromium). Exits non-zero on the
// first failed check, after saving a screenshot of what the page showed.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Browser } from "./cdp.mjs";
import * as steps from "./steps.mjs";
import { batchFinished, chartDrew, check, rows, shooter } from "./steps.mjs";

const [base, out] = process.argv.slice(2);
if (!base || !out) {
  console.error("usage: dashboard.mjs SERVER_URL OUT_DIR");
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const profile = mkdtempSync(join(tmpdir(), "mcq-dashboard-browser-"));
const browser = Browser.launch(process.env.CHROMIUM || "chromium", profile);
const sizes = [
  { name: "desktop", width: 1280, height: 800, mobile: false },
  { name: "phone", width: 390, height: 844, mobile: true },
];

const shot = shooter(out);
const submitThroughForm = (page, fields, sweep) => steps.submitThroughForm(page, base, fields, sweep);

let page;
try {
  page = await browser.newPage();
  // A server without the batch list or the queue endpoint answers 405 or
  // 404 there, and the page falls back to what it can work out itself.
  // The page also asks for a batch nobody has, to learn whether the
  // server needs a key (404: it does not, or the key is good).
  page.allowed = (url, text) => (/\/v1\/(batches|queue)(\?|$)/.test(new URL(url).pathname + new URL(url).search.slice(0, 1)) && /40[45]/.test(text)) ||
    (new URL(url).pathname === "/v1/batches/00000000-0000-0000-0000-000000000000" && /404/.test(text));
  await page.start();
  const headers = (await fetch(`${base}/`)).headers;
  check((headers.get("content-security-policy") || "").includes("script-src 'self'"), "the page carries a CSP without inline script");

  await page.viewport(1280, 800, false);
  // Defaults (the original sample, 20 periods) on few paths: quick, and exactly priceable.
  const first = await submitThroughForm(page, { "f-runs": "20000", "f-count": "12", "f-label": "browser test: 12 calls" });
  await batchFinished(page, 12);
  const exact = await page.eval("[...document.querySelectorAll('.stat')].find((s) => s.textContent.startsWith('exact price')).textContent");
  check(exact.includes("9.530286"), `the exact price is shown (${exact})`);
  const second = await submitThroughForm(page,
    { "f-runs": "20000", "f-count": "3", "f-label": "browser test: strike sweep" },
    { param: "exercise", from: "25", to: "35", points: "4" });
  await batchFinished(page, 12);
  // A batch far too long to finish on its own (1,000 × 10M paths, minutes
  // on two workers), cancelled from its page: the cancel button's POST
  // passes the server's cross-origin check as the dashboard's own call.
  const long = await submitThroughForm(page, { "f-runs": "1e7", "f-count": "1000", "f-label": "browser test: cancelled" });
  await page.waitFor("!!document.querySelector('button.danger:not([hidden])')", "the cancel button");
  // The queue view's history then holds the batch's queued jobs.
  const depth = await page.waitFor("mcq.sampleQueue().then((s) => s.queued > 0 && s)", "a queue sample with jobs queued");
  check(depth.queued > 0, `the queue sample sees ${depth.queued} queued, ${depth.running} running`);
  await page.click("button.danger");
  const cancelled = await page.waitFor(`(() => {
    const count = (state) => {
      const chip = [...document.querySelectorAll('.chip')].find((c) => c.textContent.startsWith(state));
      return chip ? Number(chip.querySelector('b').textContent.replace(/,/g, '')) : NaN;
    };
    return count('queued') === 0 && count('running') === 0 ? count('cancelled') : 0;
  })()`, "the cancelled batch to be done", 120000);
  check(page.dialogs === 1, "cancelling asked for confirmation once");
  check(cancelled > 0, `${cancelled} of 1000 jobs of ${long} cancelled from the batch page`);

  for (const size of sizes) {
    console.log(`${size.name} (${size.width}×${size.height})`);
    await page.viewport(size.width, size.height, size.mobile);

    await page.goto(`${base}/#/batch/${first}`);
    await batchFinished(page, 12);
    await chartDrew(page, "#chart-histogram", "rect.bar", 1);
    await chartDrew(page, "#chart-histogram", "line.mark.exact", 1);
    await chartDrew(page, "#chart-intervals", "g.interval", 12);
    await chartDrew(page, "#chart-stream", "rect.phase", 12);
    // Measured phases: a compute bar per job, and no note of estimates.
    await chartDrew(page, "#chart-stream", "rect.ph-compute", 12);
    const note = await page.eval("document.getElementById('stream-note').textContent");
    check(note === "", `the task stream draws measured phases${note ? ` (but says: ${note})` : ""}`);
    await shot(page, `batch-${size.name}`);

    await page.goto(`${base}/#/batch/${second}`);
    await batchFinished(page, 12);
    await chartDrew(page, "#chart-sweep", "g.interval", 12);
    await chartDrew(page, "#chart-sweep", "polyline.exact-line", 1);
    await shot(page, `sweep-${size.name}`);

    await page.goto(`${base}/#/`);
    await page.waitFor(`${rows("#batches-table")} >= 2`, "two batches listed");
    const listed = await page.eval(`[...document.querySelectorAll('#batches-table tbody tr')].map((r) => r.dataset.id)`);
    check(listed.includes(first) && listed.includes(second), "both batches are listed");
    await shot(page, `batches-${size.name}`);

    await page.goto(`${base}/#/compare/${first}/${second}`);
    await page.waitFor(`${rows("#compare-table")} >= 10`, "the comparison table");
    await chartDrew(page, "#chart-compare-phases", "rect.phase", 2);
    await chartDrew(page, "#chart-compare-a", "rect.phase", 12);
    await chartDrew(page, "#chart-compare-b", "rect.phase", 12);
    await shot(page, `compare-${size.name}`);

    await page.goto(`${base}/#/workers`);
    await page.waitFor(`${rows("#workers-table")} >= 1 && !document.querySelector('#workers-table td.empty')`, "a live worker");
    await chartDrew(page, "#chart-workers", "rect.phase", 1);
    await shot(page, `workers-${size.name}`);

    await page.goto(`${base}/#/queue`);
    await chartDrew(page, "#chart-queue", "line.grid", 1);
    await page.waitFor("document.querySelectorAll('#chart-queue polygon.area').length >= 2", "two queue samples drawn", 30000);
    await shot(page, `queue-${size.name}`);

    await page.goto(`${base}/#/submit`);
    await page.waitFor("!!document.querySelector('#submit-form')", "the submit form");
    await shot(page, `submit-${size.name}`);

    // Wide tables scroll inside their cards; the page itself never scrolls sideways.
    const overflow = await page.eval("document.documentElement.scrollWidth - document.documentElement.clientWidth");
    check(overflow <= 0, `no sideways scrolling at ${size.width} px (overflow ${overflow})`);
  }
  check(page.errors.length === 0, `no script error, CSP violation or failed request on the page${page.errors.length ? `:\n${page.errors.join("\n")}` : ""}`);
  console.log("dashboard: every check passed");
} catch (error) {
  console.error(`dashboard: FAIL: ${error.message}`);
  if (page) {
    if (page.errors.length) console.error(`page errors:\n${page.errors.join("\n")}`);
    try {
      await shot(page, "failure");
      console.error(await page.eval("document.body.innerText.slice(0, 2000)"));
    } catch (_) { /* the page is gone */ }
  }
  process.exitCode = 1;
} finally {
  await browser.close();
  // Chromium may still write to its profile while it exits: a profile
  // left in the temporary directory is not a failure of the dashboard.
  try {
    rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (err) {
    console.error(`browser test: could not remove ${profile}: ${err.message}`);
  }
}
