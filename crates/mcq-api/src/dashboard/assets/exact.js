"use strict";
// Exact prices of the model, computed in the browser so that charts can
// mark them without a round trip: meet in the middle over the 2^n paths,
// as the server's `exact` method does, for up to 40 periods.
//
// A path of n steps splits into a first half of h steps and a second of
// m = n - h. With S_h the price after the first half and T the sum of the
// second half's price ratios to S_h, the average is (sum1 + S_h·T)/(n+1),
// so the call pays when T exceeds a threshold set by the first half alone.
// Sorting the second halves by T turns each first half into one binary
// search over suffix sums of probability and probability·T.

mcq.exact = (function () {
  const MAX_PERIODS = 40;
  const cache = new Map();

  // Every path of `steps` steps from 1: [sum of prices after the start,
  // last price, probability], as three arrays indexed by the path's bits.
  function half(steps, up, down, p) {
    const count = 2 ** steps;
    const sums = new Float64Array(count);
    const lasts = new Float64Array(count);
    const probs = new Float64Array(count);
    for (let path = 0; path < count; path++) {
      let price = 1, sum = 0, prob = 1;
      for (let step = 0; step < steps; step++) {
        if ((path >> step) & 1) { price *= up; prob *= p; } else { price *= down; prob *= 1 - p; }
        sum += price;
      }
      sums[path] = sum; lasts[path] = price; probs[path] = prob;
    }
    return { sums, lasts, probs };
  }

  function callPrice(s0, k, up, down, r, n) {
    const p = (r - down) / (up - down);
    const h = Math.floor(n / 2), m = n - h;
    const first = half(h, up, down, p);
    const second = half(m, up, down, p);
    const order = Array.from({ length: second.sums.length }, (_, i) => i);
    order.sort((a, b) => second.sums[a] - second.sums[b]);
    const ts = new Float64Array(order.length);
    // tailProb[i] and tailProbT[i]: sums over the sorted entries i and above.
    const tailProb = new Float64Array(order.length + 1);
    const tailProbT = new Float64Array(order.length + 1);
    for (let i = 0; i < order.length; i++) ts[i] = second.sums[order[i]];
    for (let i = order.length - 1; i >= 0; i--) {
      const pr = second.probs[order[i]];
      tailProb[i] = tailProb[i + 1] + pr;
      tailProbT[i] = tailProbT[i + 1] + pr * ts[i];
    }
    let expected = 0;
    for (let path = 0; path < first.sums.length; path++) {
      const sh = s0 * first.lasts[path];
      const sum1 = s0 + s0 * first.sums[path];
      const threshold = ((n + 1) * k - sum1) / sh;
      let lo = 0, hi = ts.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (ts[mid] > threshold) hi = mid; else lo = mid + 1;
      }
      expected += first.probs[path] *
        (tailProb[lo] * (sum1 / (n + 1) - k) + (sh / (n + 1)) * tailProbT[lo]);
    }
    return expected / r ** n;
  }

  // The exact price of `spec` (a stored spec, defaults filled), or null
  // when the model is out of the method's reach or not arbitrage-free.
  function price(spec) {
    const { initial: s0, exercise: k, up, down, interest: r, periods: n } = spec;
    if (!(n >= 1 && n <= MAX_PERIODS && Number.isInteger(n))) return null;
    if (!(s0 > 0 && k >= 0 && down > 0 && down < r && r < up)) return null;
    const key = [s0, k, up, down, r, n, spec.option].join();
    if (cache.has(key)) return cache.get(key);
    const call = callPrice(s0, k, up, down, r, n);
    let value = call;
    if (spec.option === "put") {
      // Put-call parity: C - P = (E[A] - K) / R^n, E[A] in closed form.
      const mean = r === 1 ? s0 : (s0 * (r ** (n + 1) - 1)) / ((n + 1) * (r - 1));
      value = call - (mean - k) / r ** n;
    }
    cache.set(key, value);
    return value;
  }

  return { price, MAX_PERIODS };
})();
