"use strict";
// The operator's views: workers, the queue over time, and two batches
// compared side by side.

(function () {
  const { el, fmt, api } = mcq;

  // Throughput: the tasks a worker recorded in the minute before its last
  // heartbeat when the server reports it, else worked out by the page from
  // the tasks done between two readings of the same worker.
  const lastSeen = new Map();
  function throughputOf(worker, now) {
    if (Number.isFinite(worker.tasks_last_minute)) return `${fmt.int(worker.tasks_last_minute)} tasks/min`;
    const prev = lastSeen.get(worker.id);
    if (!prev || now - prev.t >= 1500) lastSeen.set(worker.id, { t: now, tasks: worker.tasks_done, rate: prev && prev.rate });
    if (prev && now - prev.t >= 1500) lastSeen.get(worker.id).rate = ((worker.tasks_done - prev.tasks) * 60000) / (now - prev.t);
    const rate = lastSeen.get(worker.id).rate;
    return rate === undefined || rate === null ? "…" : `${fmt.num(rate, 3)} tasks/min`;
  }

  mcq.workerName = (w) => `${w.hostname}:${w.pid}`;

  mcq.views.workers = function (main) {
    const tbody = el("tbody");
    const chart = el("div", { class: "chart", id: "chart-workers" });
    const note = el("p", { class: "muted small" });
    main.replaceChildren(
      el("h1", {}, "Workers"),
      el("section", { class: "card table-wrap" }, el("table", { id: "workers-table" }, el("thead", {}, el("tr", {},
        el("th", {}, "Worker"), el("th", {}, "State"), el("th", { class: "opt" }, "Started"), el("th", {}, "Last heartbeat"),
        el("th", { class: "num opt" }, "Slots"), el("th", { class: "num opt" }, "Tasks held"), el("th", { class: "num opt" }, "Tasks done"),
        el("th", { class: "num" }, "Jobs done"), el("th", { class: "num" }, "Throughput"))), tbody), note),
      el("section", { class: "card" }, el("h2", {}, "Jobs done per worker"), chart));
    async function refresh() {
      let workers;
      try {
        ({ workers } = await api.get("/v1/workers"));
      } catch (error) {
        if (!(error instanceof mcq.ApiError && error.forbidden)) throw error;
        tbody.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "empty" },
          `The workers are shared by every tenant: seeing them needs an admin key (${error.message}).`)));
        note.textContent = "";
        chart.replaceChildren();
        return;
      }
      const now = Date.now();
      workers.sort((a, b) => mcq.workerName(a).localeCompare(mcq.workerName(b), undefined, { numeric: true }));
      tbody.replaceChildren(...(workers.length ? workers.map((w) => {
        const rate = throughputOf(w, now);
        const state = w.state || "active";
        return el("tr", {},
          el("td", {}, el("div", {}, mcq.workerName(w)), el("div", { class: "muted mono small" }, `…${fmt.short(w.id)}`)),
          el("td", {}, el("span", { class: `badge wk-${state}` }, state)),
          el("td", { class: "opt", title: fmt.time(w.started_at) }, fmt.ago(w.started_at)),
          el("td", { title: fmt.time(w.last_heartbeat_at) }, fmt.ago(w.last_heartbeat_at)),
          el("td", { class: "num opt" }, fmt.int(w.concurrency)),
          el("td", { class: "num opt" }, w.tasks_held === undefined ? "–" : fmt.int(w.tasks_held)),
          el("td", { class: "num opt" }, fmt.int(w.tasks_done)),
          el("td", { class: "num" }, fmt.int(w.jobs_done)),
          el("td", { class: "num" }, rate));
      }) : [el("tr", {}, el("td", { colspan: 9, class: "empty" }, "No live worker. Start one with mcq worker, or mcq serve with embedded workers."))]));
      note.textContent = `${workers.length} live worker${workers.length === 1 ? "" : "s"}, ${workers.reduce((s, w) => s + w.concurrency, 0)} compute slots; refreshed every 2 s.`;
      mcq.charts.stackedBars(chart, workers.map((w) => ({ name: `${mcq.workerName(w).slice(-14)} …${w.id.slice(-4)}`, parts: [w.jobs_done] })),
        [{ name: "jobs done", cls: "ph-compute" }], fmt.int);
    }
    return mcq.every(2000, refresh);
  };

  // Queue depth sampled by the page every 2 s while it is open, kept for
  // ten minutes: from GET /v1/queue when the server has it, else summed
  // over the unfinished batches the page can see.
  const WINDOW_MS = 10 * 60 * 1000;
  const samples = [];
  let queueMissing = false;
  // Why the page counts over the batches instead: no endpoint, or a key
  // that sees one tenant only.
  let queueWhy = "";
  let queueKey = "";
  mcq.sampleQueue = async function sampleQueue() {
    let sample = null;
    // Another key may see it: ask again.
    if (queueWhy === "forbidden" && queueKey !== api.key) queueMissing = false;
    if (!queueMissing) {
      try {
        const q = await api.get("/v1/queue");
        const depth = q.depth || q.counts || q;
        sample = { t: Date.now(), queued: depth.queued || 0, scheduled: depth.scheduled || 0, running: depth.running || 0, oldest: q.oldest_queued_age_ms ?? q.oldest_queued_ms ?? null, source: "server" };
      } catch (error) {
        if (!(error instanceof mcq.ApiError) || !(error.missing || error.forbidden)) throw error;
        queueMissing = true;
        queueWhy = error.forbidden ? "forbidden" : "missing";
        queueKey = api.key;
      }
    }
    if (!sample) {
      const { batches } = await mcq.listBatches(25);
      sample = { t: Date.now(), queued: 0, running: 0, oldest: null, source: "batches" };
      for (const b of batches) { sample.queued += b.counts.queued; sample.running += b.counts.running; }
    }
    samples.push(sample);
    while (samples.length && samples[0].t < Date.now() - WINDOW_MS) samples.shift();
    return sample;
  };

  mcq.views.queue = function (main) {
    const chart = el("div", { class: "chart", id: "chart-queue" });
    const numbers = el("div", { class: "stats" });
    const note = el("p", { class: "muted small" });
    main.replaceChildren(el("h1", {}, "Queue"), numbers,
      el("section", { class: "card" }, el("h2", {}, "Jobs queued and running, up to the last 10 minutes"), chart, note));
    function draw() {
      const last = samples[samples.length - 1];
      numbers.replaceChildren(
        el("div", { class: "stat" }, el("div", { class: "stat-name" }, "queued"), el("div", { class: "stat-value" }, last ? fmt.int(last.queued) : "–")),
        el("div", { class: "stat" }, el("div", { class: "stat-name" }, "running"), el("div", { class: "stat-value" }, last ? fmt.int(last.running) : "–")),
        el("div", { class: "stat" }, el("div", { class: "stat-name" }, "oldest queued"), el("div", { class: "stat-value" }, last && last.oldest !== null ? fmt.ms(last.oldest) : "–")));
      // The time axis spans what was sampled (at least a minute), so a
      // freshly opened page does not squeeze its history into one edge.
      const span = samples.length ? Math.min(WINDOW_MS, Math.max(60000, samples[samples.length - 1].t - samples[0].t)) : 60000;
      mcq.charts.area(chart, samples, [
        { key: "running", name: "running", cls: "st-running" },
        { key: "queued", name: "queued", cls: "st-queued" },
        { key: "scheduled", name: "retry backoff", cls: "st-scheduled" }], span);
      note.textContent = !last || last.source !== "batches"
        ? "Tasks (units of claiming) by state, sampled by this page every 2 s while it is open."
        : queueWhy === "forbidden"
          ? "Your jobs, counted over your batches listed on the Batches page: the queue of every tenant needs an admin key."
          : "This server has no queue endpoint: jobs counted over the batches listed on the Batches page.";
    }
    draw();
    const stop = mcq.every(2000, async () => { if (!samples.length || Date.now() - samples[samples.length - 1].t > 1500) await mcq.sampleQueue(); draw(); });
    const onResize = mcq.debounce(draw, 150);
    window.addEventListener("resize", onResize);
    return () => { stop(); window.removeEventListener("resize", onResize); };
  };

  mcq.views.compare = function (main, a, b) {
    const pickers = el("form", { class: "card compare-pick", onsubmit: (e) => {
      e.preventDefault();
      location.hash = `#/compare/${selA.value.trim()}/${selB.value.trim()}`;
    } });
    const selA = el("input", { list: "batch-ids", value: a || "", placeholder: "first batch id", "aria-label": "First batch", required: true });
    const selB = el("input", { list: "batch-ids", value: b || "", placeholder: "second batch id", "aria-label": "Second batch", required: true });
    const options = el("datalist", { id: "batch-ids" });
    pickers.append(selA, el("span", { class: "muted" }, "vs"), selB, options, el("button", { type: "submit", class: "primary" }, "Compare"));
    const body = el("div");
    main.replaceChildren(el("h1", {}, "Compare two batches"), pickers, body);
    mcq.listBatches(25).then(({ batches }) => {
      options.replaceChildren(...batches.map((x) => el("option", { value: x.id }, `${x.label || "(no label)"} · ${x.total} jobs · ${fmt.ago(x.timings.submitted_at)}`)));
    }).catch(() => {});
    if (!a || !b) {
      body.append(el("p", { class: "muted" }, "Pick two batches, for example the same batch run with 2 and with 8 workers."));
      return () => {};
    }
    let stopped = false;
    let names = null;
    async function load() {
      const sides = await Promise.all([a, b].map(async (id) => {
        const batch = await api.get(`/v1/batches/${id}`);
        const jobs = await api.batchJobs(id, 5000);
        const phases = jobs.map(mcq.stream.phasesOf).filter(Boolean);
        mcq.stream.assignSlots(phases);
        // Workers heard from lately by host:pid; older ones keep their short id.
        if (!names) names = await api.get("/v1/workers").then((l) => Object.fromEntries(l.workers.map((w) => [w.id, `${mcq.workerName(w)} …${w.id.slice(-4)}`]))).catch(() => ({}));
        return { batch, phases, sum: mcq.stream.summary(phases) };
      }));
      if (stopped) return;
      draw(sides);
      if (sides.some((s) => !s.batch.done)) setTimeout(() => { if (!stopped) load().catch(showError); }, 2000);
    }
    function showError(error) { body.replaceChildren(el("p", { class: "error" }, error.message)); }
    let last = null;
    function draw(sides) {
      last = sides || last;
      if (!last) return;
      const [A, B] = last;
      const name = (s) => `${s === A ? "A" : "B"}: ${s.batch.label || `…${fmt.short(s.batch.id)}`}`;
      const ratio = (x, y) => (x && y ? `${(x / y).toFixed(2)}×` : "–");
      const rows = [
        ["jobs", (s) => fmt.int(s.batch.total)],
        ["workers used", (s) => (s.sum.workersKnown ? fmt.int(s.sum.lanes) : "–")],
        ["wall time", (s) => fmt.ms(s.batch.timings.makespan_ms ?? s.sum.wall)],
        ["compute total", (s) => fmt.ms(s.batch.timings.compute_ms_total)],
        ["mean queue wait", (s) => fmt.ms(s.sum.wait)],
        ["mean claim", (s) => fmt.ms(s.sum.claim)],
        ["mean compute", (s) => fmt.ms(s.sum.computeMean)],
        ["mean record", (s) => fmt.ms(s.sum.record)],
        ["throughput", (s) => (s.sum.wall > 0 ? `${fmt.num((1000 * s.sum.jobs) / s.sum.wall, 3)} jobs/s` : "–")],
        ["parallelism (compute / wall)", (s) => (s.sum.parallelism !== null ? `${s.sum.parallelism.toFixed(2)}×` : "–")],
        ["efficiency (parallelism / workers)", (s) => (s.sum.efficiency !== null ? `${(100 * s.sum.efficiency).toFixed(0)}%` : "–")],
      ];
      const wallA = A.batch.timings.makespan_ms ?? A.sum.wall, wallB = B.batch.timings.makespan_ms ?? B.sum.wall;
      const phaseChart = el("div", { class: "chart", id: "chart-compare-phases" });
      const streamA = el("div", { class: "chart", id: "chart-compare-a" });
      const streamB = el("div", { class: "chart", id: "chart-compare-b" });
      body.replaceChildren(
        el("section", { class: "card table-wrap" }, el("table", { id: "compare-table", class: "compare" },
          el("thead", {}, el("tr", {}, el("th", {}, ""),
            el("th", { class: "num" }, el("a", { href: `#/batch/${A.batch.id}` }, name(A))),
            el("th", { class: "num" }, el("a", { href: `#/batch/${B.batch.id}` }, name(B))))),
          el("tbody", {}, rows.map(([label, f]) => el("tr", {}, el("th", { scope: "row" }, label), el("td", { class: "num" }, f(A)), el("td", { class: "num" }, f(B)))))),
          el("p", { class: "small" }, `Wall time of B over A: ${ratio(wallB, wallA)}; throughput of B over A: ${ratio(B.sum.jobs * A.sum.wall, A.sum.jobs * B.sum.wall)}.`),
          el("p", { class: "small muted" }, mcq.stream.caveat(A.sum.estimated || !A.sum.workersKnown ? A.sum : B.sum))),
        el("section", { class: "card" }, el("h2", {}, "Mean time per job by phase"), phaseChart),
        el("div", { class: "grid2" },
          el("section", { class: "card" }, el("h2", {}, `Task stream: ${name(A)}`), streamA),
          el("section", { class: "card" }, el("h2", {}, `Task stream: ${name(B)}`), streamB)));
      mcq.charts.stackedBars(phaseChart, [A, B].map((s) => ({ name: s === A ? "A" : "B", parts: [s.sum.wait || 0, s.sum.claim || 0, s.sum.computeMean || 0, s.sum.record || 0] })),
        mcq.stream.PHASES, fmt.ms);
      // One time axis for both streams, so that equal lengths mean equal times.
      const span = Math.max(A.sum.wall, B.sum.wall, 1);
      mcq.stream.draw(streamA, A.phases, { spanMs: span, names });
      mcq.stream.draw(streamB, B.phases, { spanMs: span, names });
    }
    load().catch(showError);
    const onResize = mcq.debounce(() => draw(), 150);
    window.addEventListener("resize", onResize);
    return () => { stopped = true; window.removeEventListener("resize", onResize); };
  };
})();
