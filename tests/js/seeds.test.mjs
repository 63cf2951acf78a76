// The dashboard's seed derivation (crates/mcq-api/src/dashboard/assets/
// seeds.js) against the vectors the Rust kernel and the Python client
// check: node --test tests/js
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { runInNewContext } from "node:vm";

const root = new URL("../../", import.meta.url);
const read = (path) => readFileSync(new URL(path, root), "utf8");

// The script as the page runs it: after api.js has made `mcq`.
function seeds() {
  const context = { mcq: {} };
  runInNewContext(read("crates/mcq-api/src/dashboard/assets/seeds.js"), context);
  return context.mcq.seeds;
}

test("jobSeed matches the shared vectors", () => {
  const { vectors } = JSON.parse(read("tests/vectors/job_seed.json"));
  assert.ok(vectors.length >= 10);
  const { jobSeed } = seeds();
  for (const v of vectors) {
    assert.equal(jobSeed(v.base, v.index), v.seed, JSON.stringify(v));
  }
});

test("job seeds are safe integers within the seed domain", () => {
  const { jobSeed, MAX_SEED } = seeds();
  assert.equal(MAX_SEED, Number.MAX_SAFE_INTEGER);
  for (const base of [0, 1, 2 ** 32, MAX_SEED]) {
    const drawn = new Set();
    for (let i = 0; i < 2000; i++) {
      const s = jobSeed(base, i);
      assert.ok(Number.isSafeInteger(s) && s >= 0 && s <= MAX_SEED, `${base}, ${i}: ${s}`);
      drawn.add(s);
    }
    assert.equal(drawn.size, 2000);
  }
});

test("the submit form gives job i the derived seed", () => {
  const form = read("crates/mcq-api/src/dashboard/assets/submit.js");
  assert.match(form, /spec\.seed = mcq\.seeds\.jobSeed\(seed, jobs\.length\)/);
  const page = read("crates/mcq-api/src/dashboard/assets/index.html");
  assert.ok(page.indexOf("{{seeds.js}}") < page.indexOf("{{submit.js}}"), "seeds.js loads first");
});
