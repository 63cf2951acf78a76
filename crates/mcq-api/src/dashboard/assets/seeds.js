"use strict";
// The seeds of a batch's jobs from one base seed, exactly as the server
// derives them (docs/api.md, "Base seeds"): job i gets output i of
// SplitMix64 seeded with the base, shifted right by 11 bits so that it is
// at most 2^53 - 1 and fits a JavaScript number exactly. The arithmetic is
// 64-bit, hence BigInt. tests/js/seeds.test.mjs checks it against the
// vectors the Rust and Python implementations check.

mcq.seeds = (function () {
  const MASK = (1n << 64n) - 1n;
  const GOLDEN_GAMMA = 0x9e3779b97f4a7c15n;
  const MAX_SEED = 2 ** 53 - 1;

  // The seed of job `index` (from 0) of a batch with base seed `base`;
  // both whole numbers from 0 to 2^53 - 1.
  function jobSeed(base, index) {
    let z = (BigInt(base) + (BigInt(index) + 1n) * GOLDEN_GAMMA) & MASK;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    return Number((z ^ (z >> 31n)) >> 11n);
  }

  return { jobSeed, MAX_SEED };
})();
