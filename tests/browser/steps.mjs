// Steps both browser tests take: checks that log what they saw, charts
// that drew, screenshots, and the submit form filled in as a user would.
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
  console.log(`  ok: ${what}`);
}

// Every chart in `selector` drew an <svg> of non-zero size holding at
// least `min` elements matching `mark`.
export async function chartDrew(page, selector, mark, min) {
  const found = await page.waitFor(`(() => {
    const svg = document.querySelector(${JSON.stringify(`${selector} svg`)});
    if (!svg) return false;
    const r = svg.getBoundingClientRect();
    const n = svg.querySelectorAll(${JSON.stringify(mark)}).length;
    return r.width > 0 && r.height > 0 && n >= ${min} ? { w: r.width, h: r.height, n } : false;
  })()`, `${selector} to draw ${min}+ ${mark}`, 30000);
  check(true, `${selector}: ${Math.round(found.w)}×${Math.round(found.h)} px, ${found.n} × ${mark}`);
}

// A function saving a screenshot of a page as OUT/NAME.png.
export function shooter(out) {
  return async function shot(page, name) {
    const file = join(out, `${name}.png`);
    writeFileSync(file, await page.screenshot());
    console.log(`  screenshot ${file}`);
  };
}

export const rows = (selector) => `document.querySelectorAll(${JSON.stringify(`${selector} tbody tr`)}).length`;

// Fills the form and submits it with real clicks and typing; resolves to
// the new batch's id once its page shows.
export async function submitThroughForm(page, base, fields, sweep) {
  await fillForm(page, base, fields, sweep);
  await page.click("#submit-button");
  const id = await page.waitFor("(location.hash.match(/^#\\/batch\\/([0-9a-f-]{36})$/) || [])[1]", "the batch page after submitting");
  return id;
}

export async function fillForm(page, base, fields, sweep) {
  await page.goto(`${base}/#/submit`);
  await page.waitFor("!!document.querySelector('#submit-form')", "the submit form");
  for (const [id, value] of Object.entries(fields)) await page.type(`#${id}`, value);
  if (sweep) {
    await page.select("#f-sweep", sweep.param);
    await page.type("#f-sweep-from", sweep.from);
    await page.type("#f-sweep-to", sweep.to);
    await page.type("#f-sweep-steps", sweep.points);
  }
  const preview = await page.eval("document.querySelector('#submit-preview').textContent");
  console.log(`  form: ${preview}`);
}

export async function batchFinished(page, jobs) {
  await page.waitFor(`${rows("#jobs-table")} === ${jobs} &&
    [...document.querySelectorAll('#jobs-table tbody .badge')].every((b) => b.textContent === 'succeeded')`,
  `${jobs} succeeded jobs in the table`, 120000);
  check(true, `${jobs} rows, all succeeded`);
}
