"use strict";
// Where each job's time went, and the task stream: one bar per job on a
// time axis, coloured by phase, grouped by the worker that ran it.
//
// Phases come from the job's recorded timestamps (`timings`): queued →
// claimed (queue wait), claimed → compute started (claim), compute started
// → compute finished (compute), compute finished → recorded (record), for
// the work that succeeded, and `worker_id` names the worker that finished
// it. A failed job computed nothing that counts: its time after the first
// claim is drawn as claim. Only where a succeeded job has no compute
// timestamps (a server or worker of an older release) is the compute
// placed right after the claim, from its duration, and marked estimated.

mcq.stream = (function () {
  const { node, frame, ticks, scale, axes, label } = mcq.svg;
  const PHASES = [
    { key: "wait", name: "queue wait", cls: "ph-wait" },
    { key: "claim", name: "claim", cls: "ph-claim" },
    { key: "compute", name: "compute", cls: "ph-compute" },
    { key: "record", name: "record", cls: "ph-record" },
  ];

  // Epoch milliseconds with the timestamp's sub-millisecond digits kept:
  // Date.parse stops at milliseconds, and a fast job computes in less.
  const at = (iso) => {
    if (!iso) return null;
    const ms = Date.parse(iso);
    const extra = /\.\d{3}(\d+)/.exec(iso);
    return extra ? ms + Number(`0.${extra[1]}`) : ms;
  };

  // The phases of one finished job as epoch milliseconds, or null.
  function phasesOf(job) {
    const t = job.timings || {};
    const queued = at(t.queued_at || t.submitted_at);
    const claimed = at(t.claimed_at || t.started_at);
    const recorded = at(t.recorded_at || t.finished_at);
    if (queued === null || claimed === null || recorded === null) return null;
    let computeStart = at(t.compute_started_at);
    let computeEnd = at(t.compute_finished_at);
    let estimated = false;
    if (computeStart === null || computeEnd === null) {
      if (job.state === "succeeded") {
        estimated = true;
        computeStart = claimed;
        computeEnd = Math.min(recorded, claimed + (t.compute_ms || 0));
      } else {
        computeStart = computeEnd = recorded;
      }
    }
    const worker = job.worker_id || t.worker_id || (job.worker && job.worker.id) || null;
    return {
      id: job.id, worker, estimated, succeeded: job.state === "succeeded", queued, claimed, computeStart, computeEnd, recorded,
      wait: claimed - queued,
      claim: Math.max(0, computeStart - claimed),
      compute: Math.max(0, computeEnd - computeStart),
      record: Math.max(0, recorded - computeEnd),
    };
  }

  // Groups jobs by the worker that ran them. A server that records no
  // worker per job puts them all in one group: packing them into invented
  // slots would draw a concurrency that never was.
  function assignSlots(phases) {
    for (const p of phases) p.lane = p.worker || "";
    return new Set(phases.map((p) => p.lane)).size;
  }

  // Totals over a batch's phases: mean time per phase, wall time, lanes.
  function summary(phases) {
    const n = phases.length;
    const mean = (key) => (n ? phases.reduce((s, p) => s + p[key], 0) / n : null);
    const start = n ? Math.min(...phases.map((p) => p.queued)) : 0;
    const end = n ? Math.max(...phases.map((p) => p.recorded)) : 0;
    const lanes = new Set(phases.filter((p) => p.worker).map((p) => p.worker)).size;
    const compute = phases.reduce((s, p) => s + p.compute, 0);
    const wall = end - start;
    return {
      jobs: n, lanes, wall, compute,
      wait: mean("wait"), claim: mean("claim"), computeMean: mean("compute"), record: mean("record"),
      // Compute time over wall time: how many slots were busy on average;
      // divided by the slots that worked, the share of their time spent computing.
      parallelism: wall > 0 ? compute / wall : null,
      efficiency: wall > 0 && lanes ? compute / wall / lanes : null,
      workersKnown: lanes > 0,
      estimated: phases.some((p) => p.estimated),
    };
  }

  // Draws the stream; `spanMs` fixes the time axis (to compare batches),
  // `names` maps worker ids to display names.
  function draw(container, phases, options) {
    const opts = options || {};
    const n = phases.length;
    const lanes = [...new Set(phases.map((p) => p.lane))].sort((a, b) =>
      String(a).localeCompare(String(b), undefined, { numeric: true }));
    const rowHeight = Math.max(1.5, Math.min(14, 420 / Math.max(1, n)));
    const gap = 6;
    const plotHeight = n * rowHeight + lanes.length * gap;
    const narrow = (container.clientWidth || 600) < 520;
    const named = lanes.some((lane) => lane !== "");
    // A worker's group is named host:pid where known; on a phone, by the end of its id.
    const laneName = (lane) => (lane === "" ? "no worker" : narrow ? `…${String(lane).slice(-4)}` : (opts.names && opts.names[lane]) || `…${String(lane).slice(-8)}`);
    const leftPad = named ? Math.min(170, 18 + 6.5 * Math.max(...lanes.map((lane) => laneName(lane).length))) : 12;
    const { svg, width, height } = frame(container, Math.max(150, plotHeight + 60), "Task stream");
    const box = { left: leftPad, right: width - 12, top: 28, bottom: 28 + plotHeight };
    if (!n) { label(svg, box.left, 60, "No finished job yet", "muted"); return svg; }
    const start = Math.min(...phases.map((p) => p.queued));
    const span = opts.spanMs || Math.max(1, Math.max(...phases.map((p) => p.recorded)) - start);
    const x = scale(0, span, box.left, box.right);
    const xTicks = ticks(0, span, Math.max(3, Math.floor((box.right - box.left) / 85)));
    axes(svg, box, x, xTicks, (t) => (t === 0 ? "0" : mcq.fmt.ms(t)), scale(0, 1, box.bottom, box.top), [], String);
    let lx = box.left;
    for (const ph of PHASES) {
      svg.append(node("rect", { x: lx, y: 6, width: 10, height: 10, class: `swatch ${ph.cls}` }));
      label(svg, lx + 14, 15, ph.name);
      lx += (narrow ? 16 : 24) + ph.name.length * 7;
    }
    let y = box.top;
    for (const lane of lanes) {
      const rows = phases.filter((p) => p.lane === lane).sort((a, b) => a.claimed - b.claimed);
      const laneTop = y;
      svg.append(node("rect", { x: 0, y: laneTop - gap / 2, width, height: rows.length * rowHeight + gap, class: "lane-band" }));
      if (named) label(svg, box.left - 8, laneTop + Math.min(rows.length * rowHeight, 24) / 2 + 4, laneName(lane), "lane-label", "end");
      for (const p of rows) {
        const g = node("g", {}, node("title", {},
          `job …${p.id.slice(-8)}${p.worker ? ` on …${String(p.worker).slice(-8)}` : ""}\n` +
          PHASES.map((ph) => `${ph.name}: ${mcq.fmt.ms(p[ph.key])}`).join("\n") + (p.estimated ? "\n(compute placed after the claim: estimated)" : "")));
        let t = p.queued - start;
        for (const ph of PHASES) {
          const w = x(t + p[ph.key]) - x(t);
          // A succeeded job computed, however briefly: its bar is always drawn.
          if (p[ph.key] > 0 || (ph.key === "compute" && p.succeeded)) {
            g.append(node("rect", { x: x(t), y, width: Math.max(ph.key === "compute" ? 1 : 0.5, w), height: Math.max(1, rowHeight - (rowHeight > 4 ? 1 : 0)), class: `phase ${ph.cls}` }));
          }
          t += p[ph.key];
        }
        svg.append(g);
        y += rowHeight;
      }
      y += gap;
    }
    return svg;
  }

  // What a chart of these phases cannot show, in one sentence (or "").
  function caveat(sum) {
    const parts = [];
    if (sum.jobs && !sum.workersKnown) parts.push("This server records no worker per job, so the jobs form one group, in order of their first claim.");
    if (sum.estimated) parts.push("It records no compute timestamps either: compute is drawn right after the claim, from its duration, and the rest of the time until the result was recorded counts as record.");
    return parts.join(" ");
  }

  return { PHASES, phasesOf, assignSlots, summary, draw, caveat };
})();
