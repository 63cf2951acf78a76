"use strict";
// Small SVG charts drawn by hand: a histogram, per-job intervals, a
// stacked area over time and stacked bars. Each chart fills its
// container's width at the moment it is drawn; the views redraw on resize.

mcq.svg = (function () {
  const NS = "http://www.w3.org/2000/svg";

  function node(tag, attrs, ...children) {
    const element = document.createElementNS(NS, tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) element.setAttribute(name, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  }

  // A fresh <svg> filling `container`, `height` pixels tall.
  function frame(container, height, label) {
    container.replaceChildren();
    const width = Math.max(280, Math.floor(container.clientWidth || 600));
    const svg = node("svg", {
      width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label,
      class: "chart-svg",
    });
    container.append(svg);
    return { svg, width, height };
  }

  // Round tick values covering [min, max], about `count` of them.
  function ticks(min, max, count) {
    if (!(max > min)) { max = min + 1; }
    const raw = (max - min) / Math.max(1, count);
    const power = 10 ** Math.floor(Math.log10(raw));
    const step = [1, 2, 2.5, 5, 10].map((f) => f * power).find((s) => s >= raw) || raw;
    const out = [];
    for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  function scale(d0, d1, r0, r1) {
    const span = d1 - d0 || 1;
    const f = (v) => r0 + ((v - d0) / span) * (r1 - r0);
    f.domain = [d0, d1];
    return f;
  }

  // Axis lines, ticks and labels along the bottom and the left of a plot box.
  function axes(svg, box, x, xTicks, xFormat, y, yTicks, yFormat) {
    const g = node("g", { class: "axis" });
    for (const t of yTicks) {
      const py = y(t);
      g.append(node("line", { x1: box.left, x2: box.right, y1: py, y2: py, class: "grid" }));
      g.append(node("text", { x: box.left - 6, y: py + 4, "text-anchor": "end" }, yFormat(t)));
    }
    for (const t of xTicks) {
      const px = x(t);
      g.append(node("line", { x1: px, x2: px, y1: box.bottom, y2: box.bottom + 4, class: "tick" }));
      g.append(node("text", { x: px, y: box.bottom + 17, "text-anchor": "middle" }, xFormat(t)));
    }
    g.append(node("line", { x1: box.left, x2: box.right, y1: box.bottom, y2: box.bottom, class: "baseline" }));
    svg.append(g);
  }

  function label(svg, x, y, text, cls, anchor) {
    svg.append(node("text", { x, y, class: cls || "label", "text-anchor": anchor || "start" }, text));
  }

  return { node, frame, ticks, scale, axes, label };
})();

mcq.charts = (function () {
  const { node, frame, ticks, scale, axes, label } = mcq.svg;
  const fmt = mcq.fmt;

  // Histogram of `values`; `marks` are vertical lines [{value, text, cls}].
  function histogram(container, values, marks) {
    const { svg, width, height } = frame(container, 230, "Histogram of prices");
    const box = { left: 48, right: width - 14, top: 26, bottom: height - 28 };
    if (!values.length) { label(svg, box.left, 60, "No price yet", "muted"); return svg; }
    let lo = Math.min(...values), hi = Math.max(...values);
    for (const m of marks) { lo = Math.min(lo, m.value); hi = Math.max(hi, m.value); }
    if (hi - lo < 1e-12) { lo -= 0.5 * Math.abs(lo || 1) * 1e-3; hi += 0.5 * Math.abs(hi || 1) * 1e-3; }
    const pad = (hi - lo) * 0.05;
    lo -= pad; hi += pad;
    const bins = Math.max(6, Math.min(40, Math.round(Math.sqrt(values.length) * 1.5)));
    const counts = new Array(bins).fill(0);
    const binWidth = (hi - lo) / bins;
    for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / binWidth))]++;
    const x = scale(lo, hi, box.left, box.right);
    const top = Math.max(...counts);
    const y = scale(0, top * 1.1, box.bottom, box.top);
    const xTicks = ticks(lo, hi, Math.max(3, Math.floor((box.right - box.left) / 90)));
    const decimals = Math.max(0, Math.min(8, 1 - Math.floor(Math.log10((xTicks[1] - xTicks[0]) || 1))));
    axes(svg, box, x, xTicks, (t) => t.toFixed(decimals), y, ticks(0, top * 1.1, 4).filter(Number.isInteger), String);
    counts.forEach((count, i) => {
      if (!count) return;
      const x0 = x(lo + i * binWidth), x1 = x(lo + (i + 1) * binWidth);
      svg.append(node("rect", {
        x: x0 + 0.5, y: y(count), width: Math.max(1, x1 - x0 - 1), height: box.bottom - y(count), class: "bar",
      }, node("title", {}, `${count} prices in [${(lo + i * binWidth).toPrecision(6)}, ${(lo + (i + 1) * binWidth).toPrecision(6)})`)));
    });
    // Labels beside their lines: the lower value's to the left, the
    // higher's to the right, so that two close marks do not overprint.
    const lowest = Math.min(...marks.map((m) => m.value));
    marks.forEach((mark, i) => {
      const px = x(mark.value);
      svg.append(node("line", { x1: px, x2: px, y1: box.top - 4, y2: box.bottom, class: `mark ${mark.cls}` }));
      let anchor = marks.length > 1 && mark.value === lowest && i === marks.findIndex((m) => m.value === lowest) ? "end" : "start";
      if (px > width - 90) anchor = "end";
      if (px < box.left + 90) anchor = "start";
      label(svg, px + (anchor === "end" ? -4 : 4), box.top + 6 + i * 14, mark.text, `mark-label ${mark.cls}`, anchor);
    });
    label(svg, box.left, 14, `${values.length} prices`, "muted");
    return svg;
  }

  // Each row's price and 95% interval, in submission order; `exactOf(row)`
  // gives the exact price to mark, or null.
  function intervals(container, rows, exactOf) {
    const { svg, width, height } = frame(container, 240, "Price and 95% interval of each job");
    const box = { left: 56, right: width - 14, top: 26, bottom: height - 30 };
    if (!rows.length) { label(svg, box.left, 60, "No price yet", "muted"); return svg; }
    let lo = Infinity, hi = -Infinity;
    for (const r of rows) {
      lo = Math.min(lo, r.lo); hi = Math.max(hi, r.hi);
      const e = exactOf(r); if (e !== null) { lo = Math.min(lo, e); hi = Math.max(hi, e); }
    }
    if (hi - lo < 1e-12) { lo -= 1e-6; hi += 1e-6; }
    const pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
    const x = scale(-0.5, rows.length - 0.5, box.left, box.right);
    const y = scale(lo, hi, box.bottom, box.top);
    const yTicks = ticks(lo, hi, 4);
    const decimals = Math.max(0, Math.min(8, 1 - Math.floor(Math.log10((yTicks[1] - yTicks[0]) || 1))));
    const xTicks = ticks(0, rows.length - 1, Math.max(2, Math.floor((box.right - box.left) / 80))).filter(Number.isInteger);
    axes(svg, box, x, xTicks, (t) => String(t + 1), y, yTicks, (t) => t.toFixed(decimals));
    const step = (box.right - box.left) / rows.length;
    let covered = 0, judged = 0;
    const exacts = rows.map(exactOf);
    const single = exacts.every((e) => e !== null && e === exacts[0]) ? exacts[0] : null;
    if (single !== null) {
      svg.append(node("line", { x1: box.left, x2: box.right, y1: y(single), y2: y(single), class: "mark exact" }));
    }
    rows.forEach((r, i) => {
      const px = x(i);
      const e = exacts[i];
      const miss = e !== null && (e < r.lo || e > r.hi);
      if (e !== null) { judged++; if (!miss) covered++; }
      const cls = miss ? "interval miss" : "interval";
      const g = node("g", { class: cls },
        node("title", {}, `job ${i + 1}: ${r.price.toPrecision(8)}  [${r.lo.toPrecision(8)}, ${r.hi.toPrecision(8)}]${e !== null ? `  exact ${e.toPrecision(8)}` : ""}`));
      g.append(node("line", { x1: px, x2: px, y1: y(r.hi), y2: Math.max(y(r.lo), y(r.hi) + 1) }));
      if (step >= 4) g.append(node("circle", { cx: px, cy: y(r.price), r: Math.min(3, step / 3) }));
      if (e !== null && single === null && step >= 3) {
        g.append(node("line", { x1: px - Math.min(5, step / 2), x2: px + Math.min(5, step / 2), y1: y(e), y2: y(e), class: "exact-tick" }));
      }
      svg.append(g);
    });
    const note = judged ? `${covered} of ${judged} intervals cover the exact price${width > 420 ? " (95% expected)" : ""}` : `${rows.length} jobs in submission order`;
    label(svg, box.left, 14, note, "muted");
    return svg;
  }

  // Stacked areas over time: samples [{t (ms), [key]: value}], series [{key, name, cls}].
  function area(container, samples, series, windowMs) {
    const { svg, width, height } = frame(container, 220, "Queue depth over time");
    const box = { left: 52, right: width - 14, top: 26, bottom: height - 28 };
    const now = samples.length ? samples[samples.length - 1].t : Date.now();
    const x = scale(now - windowMs, now, box.left, box.right);
    const top = Math.max(1, ...samples.map((s) => series.reduce((sum, k) => sum + (s[k.key] || 0), 0)));
    const y = scale(0, top * 1.1, box.bottom, box.top);
    const xTicks = ticks(-windowMs / 1000, 0, Math.max(3, Math.floor((box.right - box.left) / 80)));
    const yTicks = ticks(0, top * 1.1, 4).filter(Number.isInteger);
    axes(svg, box, (t) => x(now + t * 1000), xTicks, (t) => (t === 0 ? "now" : Math.abs(t) >= 120 ? `${+(t / 60).toFixed(1)} min` : `${Math.round(t)} s`), y, yTicks, fmt.int);
    const base = samples.map(() => 0);
    for (const s of series) {
      if (!samples.length) break;
      const upper = samples.map((sample, i) => base[i] + (sample[s.key] || 0));
      const points = samples.map((sample, i) => `${x(sample.t).toFixed(1)},${y(upper[i]).toFixed(1)}`);
      const back = samples.map((sample, i) => `${x(sample.t).toFixed(1)},${y(base[i]).toFixed(1)}`).reverse();
      svg.append(node("polygon", { points: points.concat(back).join(" "), class: `area ${s.cls}` }));
      upper.forEach((v, i) => { base[i] = v; });
    }
    let lx = box.left;
    for (const s of series) {
      svg.append(node("rect", { x: lx, y: 6, width: 10, height: 10, class: `swatch ${s.cls}` }));
      label(svg, lx + 14, 15, s.name);
      lx += 22 + s.name.length * 7;
    }
    if (samples.length < 2) label(svg, box.left + 8, box.top + 24, "Sampling every 2 s…", "muted");
    return svg;
  }

  // Horizontal stacked bars: rows [{name, parts: [value per series]}].
  function stackedBars(container, rows, series, unitFormat) {
    const barHeight = 26;
    const { svg, width } = frame(container, 46 + rows.length * (barHeight + 12), "Mean time per job by phase");
    const box = { left: Math.min(170, 16 + 6.5 * Math.max(...rows.map((r) => r.name.length), 1)), right: width - 16, top: 30, bottom: 30 + rows.length * (barHeight + 12) };
    const top = Math.max(1e-9, ...rows.map((r) => r.parts.reduce((a, b) => a + b, 0)));
    const x = scale(0, top, box.left, box.right);
    let lx = 8;
    series.forEach((s) => {
      svg.append(node("rect", { x: lx, y: 6, width: 10, height: 10, class: `swatch ${s.cls}` }));
      label(svg, lx + 14, 15, s.name);
      lx += 22 + s.name.length * 7;
    });
    rows.forEach((row, i) => {
      const py = box.top + i * (barHeight + 12);
      label(svg, box.left - 8, py + barHeight / 2 + 4, row.name, "label", "end");
      let start = 0;
      row.parts.forEach((value, j) => {
        if (value > 0) {
          svg.append(node("rect", { x: x(start), y: py, width: Math.max(0.5, x(start + value) - x(start)), height: barHeight, class: `phase ${series[j].cls}` },
            node("title", {}, `${series[j].name}: ${unitFormat(value)}`)));
        }
        start += value;
      });
      label(svg, Math.min(x(start) + 6, box.right - 4), py + barHeight / 2 + 4, unitFormat(start), "label", x(start) + 60 > box.right ? "end" : "start");
    });
    return svg;
  }

  // Prices against the one spec field a sweep varies: each job's price and
  // 95% interval at its value, and the exact prices joined by a line.
  function sweep(container, rows, field, exactOf) {
    const { svg, width, height } = frame(container, 260, `Price by ${field}`);
    const box = { left: 56, right: width - 16, top: 26, bottom: height - 34 };
    const xs = rows.map((r) => r.x);
    let xlo = Math.min(...xs), xhi = Math.max(...xs);
    const xpad = (xhi - xlo) * 0.05 || 1;
    xlo -= xpad; xhi += xpad;
    const exact = new Map();
    for (const r of rows) { const e = exactOf(r); if (e !== null) exact.set(r.x, e); }
    let lo = Math.min(...rows.map((r) => r.lo), ...exact.values());
    let hi = Math.max(...rows.map((r) => r.hi), ...exact.values());
    const pad = (hi - lo) * 0.08 || 1e-6; lo -= pad; hi += pad;
    const x = scale(xlo, xhi, box.left, box.right);
    const y = scale(lo, hi, box.bottom, box.top);
    const xTicks = ticks(xlo, xhi, Math.max(3, Math.floor((box.right - box.left) / 80)));
    const yTicks = ticks(lo, hi, 4);
    const decimals = (t) => Math.max(0, Math.min(6, 1 - Math.floor(Math.log10((t[1] - t[0]) || 1))));
    axes(svg, box, x, xTicks, (t) => t.toFixed(decimals(xTicks)), y, yTicks, (t) => t.toFixed(decimals(yTicks)));
    label(svg, box.right, height - 4, field, "muted", "end");
    if (exact.size > 1) {
      const points = [...exact.entries()].sort((a, b) => a[0] - b[0]).map(([vx, vy]) => `${x(vx).toFixed(1)},${y(vy).toFixed(1)}`);
      svg.append(node("polyline", { points: points.join(" "), class: "exact-line" }));
    }
    for (const r of rows) {
      const e = exactOf(r);
      const miss = e !== null && (e < r.lo || e > r.hi);
      svg.append(node("g", { class: miss ? "interval miss" : "interval" },
        node("title", {}, `${field} ${r.x}: ${r.price.toPrecision(8)}  [${r.lo.toPrecision(8)}, ${r.hi.toPrecision(8)}]${e !== null ? `  exact ${e.toPrecision(8)}` : ""}`),
        node("line", { x1: x(r.x), x2: x(r.x), y1: y(r.hi), y2: Math.max(y(r.lo), y(r.hi) + 1) }),
        node("circle", { cx: x(r.x), cy: y(r.price), r: 2.5 })));
    }
    label(svg, box.left, 14, exact.size ? `${rows.length} prices · line: exact price` : `${rows.length} prices`, "muted");
    return svg;
  }

  return { histogram, intervals, area, stackedBars, sweep };
})();
