"use strict";
// The batches list and the batch page.

mcq.views = {};

(function () {
  const { el, fmt, api } = mcq;
  const STATES = ["succeeded", "running", "queued", "failed", "cancelled"];
  // Jobs read for a batch page's charts and table; the counts and statistics
  // come from the batch view and cover every job whatever the size.
  const JOB_CAP = 5000;

  mcq.progress = function progress(batch, large) {
    const bar = el("div", { class: `progress${large ? " large" : ""}`, role: "progressbar",
      "aria-valuemin": 0, "aria-valuemax": batch.total, "aria-valuenow": finishedOf(batch) });
    for (const state of STATES) {
      const n = batch.counts[state] || 0;
      if (!n) continue;
      const seg = el("span", { class: `seg st-${state}`, title: `${n} ${state}` });
      seg.style.width = `${(100 * n) / Math.max(1, batch.total)}%`;
      bar.append(seg);
    }
    return bar;
  };

  function finishedOf(batch) {
    const c = batch.counts;
    return c.succeeded + c.failed + c.cancelled;
  }

  mcq.batchState = function batchState(batch) {
    if (!batch.done) return batch.counts.running ? ["running", "running"] : ["queued", "queued"];
    if (batch.counts.failed) return ["failed", "failed"];
    if (batch.counts.cancelled && !batch.counts.succeeded) return ["cancelled", "cancelled"];
    return ["done", "succeeded"];
  };

  function badge(batch) {
    const [text, cls] = mcq.batchState(batch);
    return el("span", { class: `badge st-${cls}` }, text);
  }

  // The server's batch list, or (on a server without one) the batches this
  // browser submitted, read one by one.
  let listMissing = false;
  mcq.listBatches = async function listBatches(limit) {
    if (!listMissing) {
      try {
        const answer = await api.get(`/v1/batches?limit=${limit}`);
        return { batches: answer.batches || answer.items || [], source: "server" };
      } catch (error) {
        if (!(error instanceof mcq.ApiError) || !error.missing) throw error;
        listMissing = true;
      }
    }
    const known = mcq.known.list().slice(0, limit);
    const batches = await Promise.all(known.map((k) =>
      api.get(`/v1/batches/${k.id}`).catch((e) => (e.status === 404 ? null : Promise.reject(e)))));
    const found = batches.filter(Boolean);
    found.sort((a, b) => Date.parse(b.timings.submitted_at) - Date.parse(a.timings.submitted_at));
    return { batches: found, source: "browser" };
  };

  mcq.views.batches = function (main) {
    const selected = new Set();
    let shown = "";
    const tbody = el("tbody");
    const note = el("p", { class: "muted small" });
    const compareButton = el("button", { type: "button", disabled: true, onclick: () => {
      const [a, b] = [...selected];
      location.hash = `#/compare/${a}/${b}`;
    } }, "Compare selected");
    const openInput = el("input", { type: "text", placeholder: "batch id", "aria-label": "Batch id", class: "batch-id" });
    main.replaceChildren(
      el("div", { class: "title-row" },
        el("h1", {}, "Batches"),
        el("div", { class: "actions" },
          el("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); if (openInput.value.trim()) location.hash = `#/batch/${openInput.value.trim()}`; } },
            openInput, el("button", { type: "submit" }, "Open")),
          compareButton,
          el("a", { class: "button primary", href: "#/submit" }, "New batch"))),
      el("div", { class: "card table-wrap" },
        el("table", { class: "batches", id: "batches-table" },
          el("thead", {}, el("tr", {},
            el("th", { class: "sel" }, ""), el("th", {}, "Batch"), el("th", { class: "opt" }, "Submitted"),
            el("th", { class: "wide" }, "Progress"), el("th", { class: "num opt" }, "Jobs"),
            el("th", { class: "num" }, "Mean price ± s.e."), el("th", { class: "num opt" }, "Wall time"), el("th", { class: "opt" }, "State"))),
          tbody)),
      note);

    async function refresh() {
      const { batches, source } = await mcq.listBatches(25);
      note.textContent = source === "server"
        ? "Newest first; refreshed every 2 s."
        : "This server lists no batches: shown are the batches submitted from this browser. Refreshed every 2 s.";
      // Rows are rebuilt only when a batch changed, so that a click on a
      // row is not lost to a refresh that replaces it.
      const key = JSON.stringify(batches) + (batches.length ? fmt.ago(batches[0].timings.submitted_at) : "");
      if (key === shown) return;
      shown = key;
      if (!batches.length) {
        tbody.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "empty" },
          "No batch yet. ", el("a", { href: "#/submit" }, "Submit one"), ".")));
        return;
      }
      tbody.replaceChildren(...batches.map((b) => {
        const box = el("input", { type: "checkbox", "aria-label": "select for comparison", onchange: () => {
          if (box.checked) selected.add(b.id); else selected.delete(b.id);
          compareButton.disabled = selected.size !== 2;
        } });
        box.checked = selected.has(b.id);
        const s = b.stats;
        return el("tr", { dataset: { id: b.id } },
          el("td", { class: "sel" }, box),
          el("td", {}, el("a", { href: `#/batch/${b.id}` }, b.label || "(no label)"), el("div", { class: "muted mono small" }, `…${fmt.short(b.id)}`)),
          el("td", { class: "opt", title: fmt.time(b.timings.submitted_at) }, fmt.ago(b.timings.submitted_at)),
          el("td", { class: "wide" }, mcq.progress(b), el("div", { class: "small muted" }, `${fmt.int(finishedOf(b))} of ${fmt.int(b.total)} finished`)),
          el("td", { class: "num opt" }, fmt.int(b.total)),
          el("td", { class: "num" }, s ? `${fmt.fixed(s.mean, 4)} ± ${fmt.num(s.std_error, 2)}` : "–"),
          el("td", { class: "num opt" }, fmt.ms(b.timings.makespan_ms)),
          el("td", { class: "opt" }, badge(b)));
      }));
      compareButton.disabled = selected.size !== 2;
    }
    return mcq.every(2000, refresh);
  };

  function stat(name, value, hint, cls) {
    return el("div", { class: "stat", title: hint || null }, el("div", { class: "stat-name" }, name), el("div", { class: `stat-value${cls ? ` ${cls}` : ""}` }, value));
  }

  // The exact price to mark for a job: its own when priced exactly, else
  // the browser's when the model is within the exact method's reach.
  function exactOf(job) {
    if (job.result && job.result.method === "exact") return job.result.price;
    return mcq.exact.price(job.spec);
  }

  // The one model or precision field whose value differs between the jobs
  // (a sweep, whether the server or the form expanded it), or null.
  const SWEEPABLE = ["initial", "exercise", "up", "down", "interest", "periods", "runs", "target_std_error"];
  function sweptField(jobs) {
    const varying = SWEEPABLE.filter((f) => new Set(jobs.map((j) => j.spec[f])).size > 1);
    return varying.length === 1 && jobs.every((j) => Number.isFinite(j.spec[varying[0]])) ? varying[0] : null;
  }

  mcq.views.batch = function (main, id) {
    let stopped = false;
    // Built once: a button replaced while it is being clicked loses the click.
    const title = el("h1", {}, "Batch");
    const cancel = el("button", { type: "button", class: "danger", hidden: true, onclick: async () => {
      // The running poll sees the cancellation within its next long poll.
      if (confirm("Cancel every unfinished job of this batch?")) await api.post(`/v1/batches/${id}/cancel`);
    } }, "Cancel batch");
    const progressCard = el("div", { class: "card" }, el("p", { class: "muted" }, "Loading…"));
    const head = el("div", {},
      el("div", { class: "title-row" }, title,
        el("div", { class: "actions" }, cancel, el("a", { class: "button", href: `#/compare/${id}` }, "Compare with…"))),
      progressCard);
    const statsBox = el("div", { class: "stats" });
    const histogram = el("div", { class: "chart", id: "chart-histogram" });
    const intervals = el("div", { class: "chart", id: "chart-intervals" });
    const stream = el("div", { class: "chart", id: "chart-stream" });
    const sweepChart = el("div", { class: "chart", id: "chart-sweep" });
    const sweepTitle = el("h2", {}, "Price by parameter");
    const sweepCard = el("section", { class: "card", hidden: true }, sweepTitle, sweepChart);
    const jobsBody = el("tbody");
    const jobsNote = el("p", { class: "muted small" });
    const showAllButton = el("button", { type: "button", hidden: true, onclick: () => { showAll = true; draw(); } });
    const streamNote = el("p", { class: "muted small", id: "stream-note" });
    let showAll = false;
    main.replaceChildren(head, statsBox,
      el("div", { class: "grid2" },
        el("section", { class: "card" }, el("h2", {}, "Prices"), histogram),
        el("section", { class: "card" }, el("h2", {}, "Each job's price with its 95% interval"), intervals)),
      sweepCard,
      el("section", { class: "card" }, el("h2", {}, "Task stream"),
        el("p", { class: "muted small" }, "One bar per job from submission to its recorded result, grouped by the worker that ran it."), stream, streamNote),
      el("section", { class: "card table-wrap" }, el("h2", {}, "Jobs"),
        el("table", { class: "jobs", id: "jobs-table" }, el("thead", {}, el("tr", {},
          el("th", { class: "num" }, "#"), el("th", {}, "State"), el("th", { class: "num" }, "Price"),
          el("th", { class: "num" }, "95% interval"), el("th", { class: "num opt" }, "Std error"), el("th", { class: "num opt" }, "Paths"),
          el("th", { class: "opt" }, "Method"), el("th", { class: "num opt" }, "Queue wait"), el("th", { class: "num opt" }, "Compute"))), jobsBody),
        jobsNote, showAllButton));

    let batch = null, jobs = [];
    // Worker ids to host:pid, for the task stream's groups (workers heard
    // from lately; older ones keep their short id).
    const workerNames = {};
    async function readWorkerNames() {
      try {
        for (const w of (await api.get("/v1/workers")).workers) workerNames[w.id] = `${mcq.workerName(w)} …${w.id.slice(-4)}`;
      } catch (_) { /* names are a nicety */ }
    }
    function draw() {
      if (!batch) return;
      const [stateText] = mcq.batchState(batch);
      const s = batch.stats;
      title.replaceChildren(batch.label || "Batch", " ", el("span", { class: "muted mono small" }, batch.id));
      cancel.hidden = batch.done;
      progressCard.replaceChildren(
        el("div", { class: "progress-head" },
          el("strong", {}, `${fmt.int(finishedOf(batch))} of ${fmt.int(batch.total)} jobs finished`),
          el("span", { class: "muted" }, ` · ${stateText} · submitted ${fmt.time(batch.timings.submitted_at)}`)),
        mcq.progress(batch, true),
        el("div", { class: "chips" }, STATES.map((st) => el("span", { class: `chip st-${st}` }, `${st} `, el("b", {}, fmt.int(batch.counts[st]))))));
      const exacts = jobs.map(exactOf);
      const single = exacts.length && exacts.every((e) => e !== null && e === exacts[0]) ? exacts[0] : null;
      const phases = jobs.filter((j) => j.state === "succeeded" || j.state === "failed").map(mcq.stream.phasesOf).filter(Boolean);
      mcq.stream.assignSlots(phases);
      const sum = mcq.stream.summary(phases);
      statsBox.replaceChildren(
        stat("mean price", s ? fmt.fixed(s.mean, 6) : "–"),
        stat("std error of mean", s ? fmt.num(s.std_error, 3) : "–", "stddev / √count over the succeeded prices"),
        stat("std dev", s ? fmt.num(s.stddev, 3) : "–"),
        stat("min – max", s ? `${fmt.fixed(s.min, 4)}–${fmt.fixed(s.max, 4)}` : "–", null, "range"),
        stat("exact price", single !== null ? fmt.fixed(single, 6) : "–", single === null ? "shown when every job shares one model of at most 40 periods" : null),
        stat("wall time", fmt.ms(batch.timings.makespan_ms), "last result recorded − submission"),
        stat("compute total", fmt.ms(batch.timings.compute_ms_total)),
        stat("parallelism", sum.parallelism !== null ? `${sum.parallelism.toFixed(2)}×` : "–", "compute time / wall time of the jobs read"));
      const prices = jobs.filter((j) => j.result).map((j) => j.result.price);
      const marks = [];
      if (s) marks.push({ value: s.mean, text: `mean ${s.mean.toFixed(4)}`, cls: "mean" });
      if (single !== null) marks.push({ value: single, text: `exact ${single.toFixed(4)}`, cls: "exact" });
      mcq.charts.histogram(histogram, prices, marks);
      mcq.charts.intervals(intervals, jobs.filter((j) => j.result).map((j) => ({
        price: j.result.price, lo: j.result.ci95[0], hi: j.result.ci95[1], job: j,
      })), (r) => exactOf(r.job));
      mcq.stream.draw(stream, phases, { names: workerNames });
      const field = sweptField(jobs);
      sweepCard.hidden = !field;
      if (field) {
        sweepTitle.textContent = `Price by ${field}, each with its 95% interval`;
        mcq.charts.sweep(sweepChart, jobs.filter((j) => j.result).map((j) => ({
          x: j.spec[field], price: j.result.price, lo: j.result.ci95[0], hi: j.result.ci95[1], job: j,
        })), field, (r) => exactOf(r.job));
      }
      streamNote.textContent = mcq.stream.caveat(sum);
      const rows = showAll ? jobs : jobs.slice(0, 100);
      jobsBody.replaceChildren(...rows.map((j, i) => {
        const r = j.result;
        return el("tr", {},
          el("td", { class: "num" }, i + 1),
          el("td", {}, el("span", { class: `badge st-${j.state}`, title: j.error || null }, j.state)),
          el("td", { class: "num" }, r ? r.price.toFixed(6) : "–"),
          el("td", { class: "num" }, r ? `${r.ci95[0].toFixed(4)} … ${r.ci95[1].toFixed(4)}` : "–"),
          el("td", { class: "num opt" }, r ? fmt.num(r.std_error, 3) : "–"),
          el("td", { class: "num opt" }, r ? fmt.int(r.paths) : fmt.int(j.spec.runs)),
          el("td", { class: "opt" }, r ? `${r.method}${r.variance_reduction && r.variance_reduction !== "none" ? ` · ${r.variance_reduction}` : ""}` : j.spec.method),
          el("td", { class: "num opt" }, fmt.ms(j.timings.queue_wait_ms)),
          el("td", { class: "num opt" }, fmt.ms(j.timings.compute_ms)));
      }));
      jobsNote.textContent = jobs.length < batch.total ? `Charts and table show the first ${fmt.int(jobs.length)} of ${fmt.int(batch.total)} jobs.` : "";
      showAllButton.hidden = showAll || jobs.length <= 100;
      showAllButton.textContent = `Show all ${fmt.int(jobs.length)} rows`;
    }

    async function poll() {
      try {
        const first = !batch;
        batch = await api.get(`/v1/batches/${id}${first || batch.done ? "" : "?wait=1s"}`);
        jobs = await api.batchJobs(id, JOB_CAP);
        if (jobs.some((j) => (j.worker_id || (j.timings && j.timings.worker_id)) && !workerNames[j.worker_id || j.timings.worker_id])) await readWorkerNames();
        mcq.known.add(batch.id, batch.label);
        draw();
        mcq.setStatus(batch.done ? "" : "live");
      } catch (error) {
        if (error.status === 404) {
          main.replaceChildren(el("h1", {}, "No such batch"), el("p", {}, `The server knows no batch ${id}: a wrong id, or finished long ago and pruned.`));
          stopped = true;
          return;
        }
        mcq.setStatus(error.message, true);
        await new Promise((r) => setTimeout(r, 2000));
      }
      if (!stopped && batch && !batch.done) setTimeout(poll, 250);
    }
    poll();
    const onResize = mcq.debounce(draw, 150);
    window.addEventListener("resize", onResize);
    return () => { stopped = true; window.removeEventListener("resize", onResize); };
  };
})();
