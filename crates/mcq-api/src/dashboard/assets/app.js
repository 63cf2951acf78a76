"use strict";
// Start-up: the router over the URL's hash, timers that pause in a hidden
// tab, the API key prompt, and the status line.

(function () {
  const { el } = mcq;

  mcq.debounce = function debounce(f, ms) {
    let timer = null;
    return (...args) => { clearTimeout(timer); timer = setTimeout(() => f(...args), ms); };
  };

  // Runs `f` now and then every `ms` (not while the tab is hidden); returns
  // the function that stops it. A failed run shows in the status line.
  mcq.every = function every(ms, f) {
    let stopped = false, timer = null;
    async function tick() {
      if (stopped) return;
      if (!document.hidden) {
        try { await f(); mcq.setStatus("live"); } catch (error) { mcq.setStatus(error.message || String(error), true); }
      }
      if (!stopped) timer = setTimeout(tick, ms);
    }
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  };

  mcq.setStatus = function setStatus(text, isError) {
    const status = document.getElementById("status");
    status.textContent = text;
    status.className = `status${isError ? " error" : text === "live" ? " live" : ""}`;
  };

  // The key dialog. With `required` (the server answered 401) it stays
  // until a key is entered; otherwise it also offers to forget the key or
  // to go back. Resolves once the dialog closes; concurrent 401s share one.
  let asking = null;
  mcq.askKey = function askKey({ required = false, refusal = "" } = {}) {
    if (asking) return asking;
    const dialog = document.getElementById("key-dialog");
    const input = document.getElementById("key-input");
    const message = document.getElementById("key-error");
    message.hidden = !refusal;
    message.textContent = refusal;
    document.getElementById("key-forget").hidden = required || !mcq.api.key;
    document.getElementById("key-back").hidden = required;
    asking = new Promise((resolve) => {
      const done = () => { asking = null; resolve(); };
      document.getElementById("key-form").onsubmit = () => { mcq.api.key = input.value.trim(); input.value = ""; done(); };
      document.getElementById("key-forget").onclick = () => { mcq.api.key = ""; dialog.close(); done(); };
      document.getElementById("key-back").onclick = () => { dialog.close(); done(); };
      // Escape closes a dialog; one the server insists on stays open.
      dialog.oncancel = (event) => { if (required) event.preventDefault(); else done(); };
      dialog.showModal();
      input.focus();
    });
    return asking;
  };
  mcq.api.onUnauthorized = (error) => mcq.askKey({
    required: true, refusal: mcq.api.key ? `The key was refused: ${error.message}` : "",
  });

  // The header's key button: which key the tab uses, and a way to change it.
  const keyButton = document.getElementById("key-button");
  keyButton.addEventListener("click", () => mcq.askKey().then(() => route()));
  mcq.api.onKeyChange = function showKey() {
    keyButton.hidden = !mcq.api.key;
    keyButton.textContent = `key ${mcq.api.keyId || "set"}`;
    keyButton.title = "The API key this tab sends (kept in this tab only): change or forget it";
  };
  mcq.api.onKeyChange();

  let stop = () => {};
  function route() {
    stop();
    const main = document.getElementById("view");
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
    const [name = "batches", ...args] = parts;
    const view = { batches: mcq.views.batches, batch: mcq.views.batch, submit: mcq.views.submit,
      workers: mcq.views.workers, queue: mcq.views.queue, compare: mcq.views.compare }[name];
    for (const link of document.querySelectorAll("#nav a")) {
      link.classList.toggle("active", link.dataset.view === (name === "batch" ? "batches" : name));
    }
    if (!view) {
      main.replaceChildren(el("h1", {}, "Not found"), el("p", {}, el("a", { href: "#/" }, "Back to the batches")));
      stop = () => {};
      return;
    }
    document.title = `mcq · ${name}`;
    stop = view(main, ...args) || (() => {});
    window.scrollTo(0, 0);
  }
  window.addEventListener("hashchange", route);
  // Ask for a key at once on a server that needs one, rather than at the
  // first view that happens to read something: a batch nobody has answers
  // 404 with a valid key (or none needed) and 401 without.
  mcq.api.get("/v1/batches/00000000-0000-0000-0000-000000000000").catch(() => {});
  route();

  // The queue chart needs history: sample in the background from the start.
  let sampling = false;
  setInterval(() => {
    if (document.hidden || sampling) return;
    sampling = true;
    mcq.sampleQueue().catch(() => {}).finally(() => { sampling = false; });
  }, 2000);
})();
