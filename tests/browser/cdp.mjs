// A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`:
// no WebSocket, no npm package, only Node and the browser. Messages are
// JSON documents separated by NUL bytes on file descriptors 3 (to the
// browser) and 4 (from it).
import { spawn } from "node:child_process";

export class Browser {
  static launch(executable, userDataDir) {
    const args = [
      "--headless", "--remote-debugging-pipe", `--user-data-dir=${userDataDir}`,
      "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
      "--hide-scrollbars", "--mute-audio", "--disable-extensions", "--force-color-profile=srgb",
      "--font-render-hinting=none",
    ];
    // The sandbox needs user namespaces, which containers running as root lack.
    if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");
    const child = spawn(executable, args, { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
    return new Browser(child);
  }

  constructor(child) {
    this.child = child;
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = [];
    this.stderr = "";
    child.stderr.on("data", (d) => { this.stderr = (this.stderr + d).slice(-4000); });
    let buffer = "";
    child.stdio[4].on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      let end;
      while ((end = buffer.indexOf("\0")) >= 0) {
        const message = JSON.parse(buffer.slice(0, end));
        buffer = buffer.slice(end + 1);
        this.dispatch(message);
      }
    });
    this.exited = new Promise((resolve) => child.on("exit", resolve));
    child.on("exit", (code) => {
      for (const { reject } of this.pending.values()) reject(new Error(`browser exited (${code}): ${this.stderr}`));
      this.pending.clear();
    });
  }

  dispatch(message) {
    if (message.id !== undefined) {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (!waiter) return;
      if (message.error) waiter.reject(new Error(`${waiter.method}: ${message.error.message}`));
      else waiter.resolve(message.result);
      return;
    }
    for (const listener of this.listeners) listener(message);
  }

  send(method, params = {}, sessionId) {
    const id = this.nextId++;
    const message = { id, method, params };
    if (sessionId) message.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, method });
      this.child.stdio[3].write(`${JSON.stringify(message)}\0`);
    });
  }

  on(listener) { this.listeners.push(listener); }

  async newPage() {
    const { targetId } = await this.send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = await this.send("Target.attachToTarget", { targetId, flatten: true });
    return new Page(this, sessionId);
  }

  async close() {
    try { await Promise.race([this.send("Browser.close"), new Promise((r) => setTimeout(r, 5000))]); } catch (_) { /* already gone */ }
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
    await this.exited;
  }
}

export class Page {
  constructor(browser, sessionId) {
    this.browser = browser;
    this.sessionId = sessionId;
    this.errors = [];
    browser.on((m) => {
      if (m.sessionId !== sessionId) return;
      if (m.method === "Page.javascriptDialogOpening") {
        // confirm() before a cancel: answered as a user would, yes.
        this.dialogs = (this.dialogs || 0) + 1;
        this.send("Page.handleJavaScriptDialog", { accept: true }).catch(() => {});
      } else if (m.method === "Runtime.exceptionThrown") {
        const d = m.params.exceptionDetails;
        this.errors.push(`exception: ${(d.exception && d.exception.description) || d.text}`);
      } else if (m.method === "Runtime.consoleAPICalled" && m.params.type === "error") {
        this.errors.push(`console.error: ${m.params.args.map((a) => a.value ?? a.description).join(" ")}`);
      } else if (m.method === "Log.entryAdded" && m.params.entry.level === "error") {
        const { source, text, url } = m.params.entry;
        if (!(this.allowed && url && this.allowed(url, text))) this.errors.push(`${source}: ${text}${url ? ` (${url})` : ""}`);
      }
    });
  }

  send(method, params) { return this.browser.send(method, params, this.sessionId); }

  async start() {
    await this.send("Page.enable");
    await this.send("Runtime.enable");
    await this.send("Log.enable");
  }

  async viewport(width, height, mobile) {
    await this.send("Emulation.setDeviceMetricsOverride", { width, height, deviceScaleFactor: 1, mobile });
  }

  // The value of `expression`, awaited when it is a promise.
  async eval(expression) {
    const { result, exceptionDetails } = await this.send("Runtime.evaluate", {
      expression, awaitPromise: true, returnByValue: true,
    });
    if (exceptionDetails) {
      throw new Error(`${expression}: ${(exceptionDetails.exception && exceptionDetails.exception.description) || exceptionDetails.text}`);
    }
    return result.value;
  }

  // Polls `expression` until it is truthy; fails with `what` after `timeoutMs`.
  async waitFor(expression, what, timeoutMs = 60000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      try {
        last = await this.eval(expression);
        if (last) return last;
      } catch (error) {
        // The page may be between two views; only the deadline fails the test.
        last = error.message;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
  }

  async goto(url) {
    await this.send("Page.navigate", { url });
    await this.waitFor("document.readyState === 'complete' && !!window.mcq && !!mcq.views", "the page to load");
  }

  // Loads the page again, as the browser's reload button does.
  async reload() {
    await this.eval("window.__beforeReload = true");
    await this.send("Page.reload", {});
    await this.waitFor("!window.__beforeReload && document.readyState === 'complete' && !!window.mcq && !!mcq.views", "the page to load again");
  }

  // A real mouse click in the middle of the element `selector`.
  async click(selector) {
    const box = await this.eval(`(() => { const e = document.querySelector(${JSON.stringify(selector)});
      if (!e) return null; e.scrollIntoView({ block: "center" }); const r = e.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; })()`);
    if (!box) throw new Error(`no element ${selector} to click`);
    for (const type of ["mousePressed", "mouseReleased"]) {
      await this.send("Input.dispatchMouseEvent", { type, x: box.x, y: box.y, button: "left", clickCount: 1 });
    }
  }

  // Replaces the value of the input `selector` by typing `text` into it.
  async type(selector, text) {
    await this.click(selector);
    await this.eval(`document.querySelector(${JSON.stringify(selector)}).select()`);
    await this.send("Input.insertText", { text });
  }

  async select(selector, value) {
    await this.eval(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); e.value = ${JSON.stringify(value)};
      e.dispatchEvent(new Event("change", { bubbles: true })); })()`);
  }

  // A PNG of the whole page (not only the viewport).
  async screenshot() {
    const size = await this.eval("({ w: document.documentElement.clientWidth, h: document.documentElement.scrollHeight })");
    const { data } = await this.send("Page.captureScreenshot", {
      format: "png", captureBeyondViewport: true, clip: { x: 0, y: 0, width: size.w, height: Math.min(size.h, 6000), scale: 1 },
    });
    return Buffer.from(data, "base64");
  }
}
