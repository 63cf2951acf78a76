"use strict";
// The submit form: the model's seven parameters, the method, the variance
// reduction, runs or a target standard error, a count, and optionally a
// sweep of one parameter, expanded here into the batch's jobs.

(function () {
  const { el, fmt, api } = mcq;
  const PARAMS = [
    { key: "initial", label: "Initial price S0", value: 30, step: "any", hint: "> 0" },
    { key: "exercise", label: "Exercise price K", value: 30, step: "any", hint: "≥ 0" },
    { key: "up", label: "Up factor u", value: 1.4, step: "any", hint: "> interest" },
    { key: "down", label: "Down factor d", value: 0.8, step: "any", hint: "0 < d < interest" },
    { key: "interest", label: "Interest R per period", value: 1.08, step: "any", hint: "gross factor, e.g. 1.08" },
    { key: "periods", label: "Periods n", value: 20, step: 1, int: true, hint: "exact: n ≤ 40" },
  ];
  const SWEEPABLE = [...PARAMS.map((p) => p.key), "runs", "target_std_error"];
  const INTEGER = new Set(["periods", "runs"]);

  // The swept values: `steps` points from `from` to `to`, evenly spaced or
  // (log) in a constant ratio; integer parameters rounded, repeats dropped.
  function sweepValues(key, from, to, steps, log) {
    const values = [];
    for (let i = 0; i < steps; i++) {
      const f = steps === 1 ? 0 : i / (steps - 1);
      let v = log ? from * (to / from) ** f : from + (to - from) * f;
      v = INTEGER.has(key) ? Math.round(v) : +v.toPrecision(12);
      if (!values.includes(v)) values.push(v);
    }
    return values;
  }
  mcq.sweepValues = sweepValues;

  mcq.views.submit = function (main) {
    const field = (p) => el("label", { class: "field" }, el("span", {}, p.label),
      el("input", { id: `f-${p.key}`, name: p.key, type: "number", step: p.step, value: p.value, required: true }),
      el("small", { class: "muted" }, p.hint));
    const select = (id, label, options, value) => el("label", { class: "field" }, el("span", {}, label),
      el("select", { id, name: id }, options.map((o) => el("option", { value: o, selected: o === value }, o))));
    const form = el("form", { id: "submit-form", class: "card form", novalidate: true },
      el("fieldset", {}, el("legend", {}, "Model"), el("div", { class: "fields" }, PARAMS.map(field),
        select("f-option", "Option", ["call", "put"], "call"))),
      el("fieldset", {}, el("legend", {}, "Method"), el("div", { class: "fields" },
        select("f-method", "Method", ["mc", "exact"], "mc"),
        select("f-vr", "Variance reduction", ["auto", "none", "antithetic", "arithmetic", "geometric"], "auto"),
        el("label", { class: "field" }, el("span", {}, "Precision"),
          el("select", { id: "f-precision" }, el("option", { value: "runs" }, "a number of paths"), el("option", { value: "target" }, "a target standard error"))),
        el("label", { class: "field", id: "runs-field" }, el("span", {}, "Runs (paths)"), el("input", { id: "f-runs", name: "runs", type: "text", value: "1000000", inputmode: "numeric" }), el("small", { class: "muted" }, "e.g. 1e6")),
        el("label", { class: "field", id: "target-field", hidden: true }, el("span", {}, "Target std error"), el("input", { id: "f-target", name: "target_std_error", type: "text", value: "0.001" })),
        el("label", { class: "field" }, el("span", {}, "Seed"), el("input", { id: "f-seed", type: "text", placeholder: "drawn", inputmode: "numeric" }), el("small", { class: "muted" }, "job i gets job_seed(seed, i)")))),
      el("fieldset", {}, el("legend", {}, "Batch"), el("div", { class: "fields" },
        el("label", { class: "field" }, el("span", {}, "Count"), el("input", { id: "f-count", type: "text", value: "100", inputmode: "numeric" }), el("small", { class: "muted" }, "jobs per sweep point")),
        el("label", { class: "field wide" }, el("span", {}, "Label"), el("input", { id: "f-label", type: "text", maxlength: 200, placeholder: "what this batch is for" })))),
      el("fieldset", {}, el("legend", {}, "Sweep one parameter (optional)"), el("div", { class: "fields" },
        el("label", { class: "field" }, el("span", {}, "Parameter"), el("select", { id: "f-sweep" }, el("option", { value: "" }, "none"), SWEEPABLE.map((k) => el("option", { value: k }, k)))),
        el("label", { class: "field" }, el("span", {}, "From"), el("input", { id: "f-sweep-from", type: "text" })),
        el("label", { class: "field" }, el("span", {}, "To"), el("input", { id: "f-sweep-to", type: "text" })),
        el("label", { class: "field" }, el("span", {}, "Points"), el("input", { id: "f-sweep-steps", type: "number", min: 1, max: 1000, value: 5 })),
        el("label", { class: "field check" }, el("input", { id: "f-sweep-log", type: "checkbox" }), el("span", {}, "logarithmic spacing")))),
      el("p", { id: "submit-preview", class: "preview" }),
      el("div", { id: "submit-errors", class: "error", hidden: true }),
      el("div", { class: "actions" }, el("button", { type: "submit", class: "primary", id: "submit-button" }, "Submit batch")));
    main.replaceChildren(el("h1", {}, "Submit a batch"), form);

    const $ = (id) => form.querySelector(`#${id}`);
    const number = (id) => { const raw = $(id).value.trim(); return raw === "" ? NaN : Number(raw); };

    // The batch request the form describes, or a list of input problems.
    function build() {
      const problems = [];
      const base = {};
      for (const p of PARAMS) {
        const v = number(`f-${p.key}`);
        if (!Number.isFinite(v) || (p.int && !Number.isInteger(v))) problems.push([p.key, `${p.label}: a ${p.int ? "whole " : ""}number is needed`]);
        base[p.key] = v;
      }
      base.option = $("f-option").value;
      base.method = $("f-method").value;
      if (base.method === "mc") {
        base.variance_reduction = $("f-vr").value;
        if ($("f-precision").value === "runs") {
          base.runs = number("f-runs");
          if (!Number.isInteger(base.runs) || base.runs < 1) problems.push(["runs", "Runs: a whole number of paths is needed (1e6 works)"]);
        } else {
          base.target_std_error = number("f-target");
          if (!(base.target_std_error > 0)) problems.push(["target_std_error", "Target std error: a positive number is needed"]);
        }
      }
      const count = number("f-count");
      if (!Number.isInteger(count) || count < 1) problems.push(["count", "Count: a whole number of at least 1 is needed"]);
      const seedText = $("f-seed").value.trim();
      const seed = seedText === "" ? null : Number(seedText);
      if (seed !== null && !(Number.isSafeInteger(seed) && seed >= 0)) problems.push(["seed", "Seed: a whole number ≥ 0 is needed"]);
      let points = [null];
      const sweep = $("f-sweep").value;
      if (sweep) {
        const from = Number($("f-sweep-from").value), to = Number($("f-sweep-to").value), steps = Number($("f-sweep-steps").value);
        const log = $("f-sweep-log").checked;
        if (!Number.isFinite(from) || !Number.isFinite(to) || !(Number.isInteger(steps) && steps >= 1)) problems.push(["sweep", "Sweep: from, to and a whole number of points are needed"]);
        else if (log && !(from > 0 && to > 0)) problems.push(["sweep", "Sweep: logarithmic spacing needs positive ends"]);
        else points = sweepValues(sweep, from, to, steps, log);
      }
      const jobs = [];
      for (const value of points) {
        for (let i = 0; i < (Number.isInteger(count) ? count : 0); i++) {
          const spec = { ...base };
          if (sweep) {
            spec[sweep] = value;
            // A swept precision replaces the other one.
            if (sweep === "runs") delete spec.target_std_error;
            if (sweep === "target_std_error") delete spec.runs;
          }
          // The server's derivation: this batch and one sent with a base seed
          // by any other client price the same streams.
          if (seed !== null) spec.seed = mcq.seeds.jobSeed(seed, jobs.length);
          jobs.push(spec);
        }
      }
      const label = $("f-label").value.trim();
      return { problems, request: { ...(label ? { label } : {}), jobs }, sweep, points };
    }

    function preview() {
      const exact = $("f-method").value === "exact";
      $("f-vr").disabled = exact; $("f-precision").disabled = exact;
      const target = $("f-precision").value === "target";
      $("runs-field").hidden = target; $("target-field").hidden = !target;
      $("f-runs").disabled = exact; $("f-target").disabled = exact;
      const { problems, request, sweep, points } = build();
      const text = problems.length ? problems[0][1] : `${fmt.int(request.jobs.length)} job${request.jobs.length === 1 ? "" : "s"}` +
        (sweep ? ` · ${sweep} at ${points.map((v) => fmt.num(v, 6)).join(", ")}` : "") +
        (exact ? " · exact (all 2^n paths)" : request.jobs[0] && request.jobs[0].runs ? ` · ${fmt.int(request.jobs[0].runs)} paths each` : "");
      $("submit-preview").textContent = text;
    }
    form.addEventListener("input", preview);
    form.addEventListener("change", preview);
    preview();

    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      form.querySelectorAll(".invalid").forEach((n) => n.classList.remove("invalid"));
      const errors = $("submit-errors");
      errors.className = "error";
      const { problems, request } = build();
      const show = (items) => {
        errors.hidden = false;
        errors.replaceChildren(el("ul", {}, items.map(([key, text]) => {
          const input = form.querySelector(`[name="${key}"]`);
          if (input) input.classList.add("invalid");
          return el("li", {}, text);
        })));
      };
      if (problems.length) { show(problems); return; }
      const button = $("submit-button");
      button.disabled = true; button.textContent = "Submitting…";
      try {
        const accepted = await api.post("/v1/batches", request);
        mcq.known.add(accepted.id, request.label);
        location.hash = `#/batch/${accepted.id}`;
      } catch (error) {
        if (error instanceof mcq.ApiError && error.forbidden) {
          // A read key: say so plainly, and offer the way out.
          errors.hidden = false;
          errors.className = "refusal";
          errors.replaceChildren(
            el("p", {}, el("strong", {}, "Not submitted: this key may only read."), " ",
              `The server says: ${error.message}. Nothing was enqueued.`),
            el("p", { class: "small muted" }, "An operator makes a key that may submit with ",
              el("code", {}, "mcq keys create --tenant NAME"), " (role submit)."),
            el("button", { type: "button", id: "submit-change-key", onclick: () => mcq.askKey() }, "Use another key"));
          return;
        }
        const list = (error.problem && error.problem.errors) || [];
        // Pointers name a job and a field (/jobs/17/down); one line per field.
        const seen = new Map();
        for (const e of list) {
          const key = e.pointer.split("/").pop();
          if (!seen.has(key)) seen.set(key, e.detail);
        }
        show(seen.size ? [...seen] : [["", error.message]]);
      } finally {
        button.disabled = false; button.textContent = "Submit batch";
      }
    });
    return () => {};
  };
})();
