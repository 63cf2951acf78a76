"use strict";
// The JSON API as the dashboard uses it: one place for the API key, the
// headers that make writes safe, and the problem documents of errors.
// Every other script reaches the server through `mcq.api`.
window.mcq = {};

mcq.ApiError = class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
  }
  // True when the endpoint does not exist on this server (an older
  // version): the caller falls back to what the page can work out itself.
  get missing() {
    return this.status === 405 || (this.status === 404 && this.problem.type === "/problems/no-route");
  }
  // True when the key's role may not do this (a read key submitting, a
  // tenant's key asking for every tenant's workers).
  get forbidden() {
    return this.status === 403 && this.problem.type === "/problems/forbidden";
  }
};

mcq.api = {
  // Kept for the tab's life only, never in localStorage or a cookie.
  get key() { return sessionStorage.getItem("mcq.key") || ""; },
  set key(value) {
    if (value) sessionStorage.setItem("mcq.key", value);
    else sessionStorage.removeItem("mcq.key");
    this.refused.clear();
    if (this.onKeyChange) this.onKeyChange();
  },
  // The key's public id (mcq_<id>_<secret>), safe to show.
  get keyId() {
    const m = /^mcq_([0-9a-f]+)_/.exec(this.key);
    return m ? m[1] : "";
  },
  // Reads this key's role may not make, by path: asked once, not every 2 s.
  refused: new Map(),
  onKeyChange: null,
  // Called with a retry function when the server answers 401.
  onUnauthorized: null,

  async request(method, path, body) {
    const route = path.split("?")[0];
    if (method === "GET" && this.refused.has(route)) throw this.refused.get(route);
    const headers = { accept: "application/json" };
    if (this.key) headers.authorization = `Bearer ${this.key}`;
    const init = { method, headers, credentials: "omit", cache: "no-store" };
    if (method !== "GET") {
      // A JSON content type on every write: no plain form of another site
      // can send one, and the server refuses writes from other origins.
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    const response = await fetch(path, init);
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    if (!response.ok) {
      const error = new mcq.ApiError(response.status, json);
      if (response.status === 401 && this.onUnauthorized) {
        await this.onUnauthorized(error);
        return this.request(method, path, body);
      }
      if (method === "GET" && error.forbidden) this.refused.set(route, error);
      throw error;
    }
    return json;
  },
  get(path) { return this.request("GET", path); },
  post(path, body) { return this.request("POST", path, body); },

  // Every job of a batch, page by page, up to `cap` jobs.
  async batchJobs(id, cap) {
    const jobs = [];
    let after = "";
    while (jobs.length < cap) {
      const limit = Math.min(1000, cap - jobs.length);
      const page = await this.get(`/v1/batches/${id}/jobs?limit=${limit}${after ? `&after=${after}` : ""}`);
      jobs.push(...page.jobs);
      if (!page.next) break;
      after = page.next;
    }
    return jobs;
  },
};

// Batches submitted from this browser, for servers without a batch list.
mcq.known = {
  list() {
    try { return JSON.parse(localStorage.getItem("mcq.batches") || "[]"); } catch (_) { return []; }
  },
  add(id, label) {
    const list = mcq.known.list().filter((b) => b.id !== id);
    list.unshift({ id, label: label || null, at: new Date().toISOString() });
    localStorage.setItem("mcq.batches", JSON.stringify(list.slice(0, 200)));
  },
};

// Formatting shared by the views.
mcq.fmt = {
  num(x, digits = 4) {
    if (x === null || x === undefined || !Number.isFinite(x)) return "–";
    return x.toLocaleString("en-US", { maximumSignificantDigits: digits, minimumSignificantDigits: Math.min(digits, 1) });
  },
  fixed(x, decimals = 4) {
    return x === null || x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(decimals);
  },
  int(x) { return x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"); },
  ms(ms) {
    if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
    if (ms < 1) return `${ms.toFixed(2)} ms`;
    if (ms < 1000) return `${ms.toPrecision(3)} ms`;
    if (ms < 120000) return `${(ms / 1000).toPrecision(3)} s`;
    return `${(ms / 60000).toPrecision(3)} min`;
  },
  ago(iso) {
    if (!iso) return "–";
    const s = (Date.now() - Date.parse(iso)) / 1000;
    if (s < 1.5) return "just now";
    if (s < 90) return `${Math.round(s)} s ago`;
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    if (s < 129600) return `${Math.round(s / 3600)} h ago`;
    return new Date(iso).toLocaleDateString();
  },
  time(iso) { return iso ? new Date(iso).toLocaleString() : "–"; },
  short(id) { return id ? id.slice(-8) : ""; },
};

// Element builder: el("td", {class: "num"}, "1.5", child, …).
mcq.el = function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
};
