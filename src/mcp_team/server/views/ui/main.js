/* main.js: where the record comes from, and keeping the view current.
 *
 * config.mode "http": the page at /runs (the list) or /runs/{id}; it polls the JSON beside it
 * (/runs.json, /runs/{id}.json: the same record as team://runs/{id}) while the run goes.
 * config.mode "app": inside an MCP App frame. The host sends the tool's input, then its result (the run
 * record, or for a failed run an error naming it). While the tool runs, the view reads team://runs and
 * team://runs/{id} through the host (resources/read) to follow the run live, when the host allows it.
 */
"use strict";
(function () {
  const { h, renderRun, renderRunList, openRunForm, fitLabels } = window.RunView;
  const config = JSON.parse(document.getElementById("config").textContent || "{}");
  const root = document.getElementById("root");
  const POLL_MS = 500;
  const LIST_POLL_MS = 2000;
  const RETRY_MS = 3000;

  // ---- showing: the record is drawn again on every change; open <details> and the scroll stay put
  const openState = new Map();
  root.addEventListener("toggle", (e) => {
    const key = e.target.dataset && e.target.dataset.key;
    if (key) openState.set(key, e.target.open);
  }, true);
  let banner = null;
  let shown = null;  // the run on screen

  function show(node) {
    const x = window.scrollX, y = window.scrollY;
    root.replaceChildren(...(banner ? [h("div", { class: "banner", role: "status" }, banner)] : []), node);
    for (const d of root.querySelectorAll("details[data-key]")) {
      if (openState.has(d.dataset.key)) d.open = openState.get(d.dataset.key);
    }
    fitLabels(root);  // labels that do not fit in their bars go beside them: this needs the layout
    window.scrollTo(x, y);
  }
  let lastWidth = 0;
  new ResizeObserver(() => {
    if (root.clientWidth !== lastWidth) fitLabels(root);
    lastWidth = root.clientWidth;
  }).observe(root);
  const notice = (text, error) => show(h("p", { class: error ? "notice error" : "notice", id: "notice" }, text));

  function focusHandoff(elementId) {
    const card = document.getElementById(elementId);
    if (!card) return;
    card.open = true;
    openState.set(card.dataset.key, true);
    card.scrollIntoView({ block: "nearest" });
    card.classList.add("flash");
    setTimeout(() => card.classList.remove("flash"), 1200);
  }

  let openLink = null;  // app mode: links go through the host
  function showRun(run) {
    // A late live read never replaces the finished record.
    if (shown && shown.run_id === run.run_id && shown.status !== "running" && run.status === "running") return;
    shown = run;
    document.title = `${run.status} · ${String(run.request || "run").slice(0, 60)} · mcp-team`;
    show(renderRun(run, { traceUrl: config.traceUrl, focusHandoff, openLink }));
  }
  const running = () => shown && shown.status === "running";

  function applyTheme(theme) {
    document.documentElement.dataset.theme = theme === "dark" ? "dark" : "light";
  }
  const dark = window.matchMedia("(prefers-color-scheme: dark)");

  // ---- the HTTP pages
  async function getJSON(url) {
    const response = await fetch(url, { cache: "no-store", credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.status === 404) return { missing: await response.text() };
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    return { data: await response.json() };
  }

  /* Run `step` until it returns 0 (else: the next delay); failures are reported and retried. */
  function poll(step, report = reportOnRun) {
    const loop = async () => {
      let again;
      try {
        again = await step();
        report(null);
      } catch (e) {
        report(`Cannot reach the server (${e.message}); trying again…`);
        again = RETRY_MS;
      }
      if (again) setTimeout(loop, again);
    };
    loop();
  }
  function reportOnRun(problem) {
    if (problem === banner) return;
    banner = problem;
    if (shown) showRun(shown);
    else if (problem) notice(problem, true);
  }

  function startHttp() {
    applyTheme(dark.matches ? "dark" : "light");
    dark.addEventListener("change", () => applyTheme(dark.matches ? "dark" : "light"));
    const base = location.pathname.replace(/\/+$/, "");
    if (config.runId == null) {
      // The form stays while the list below it is redrawn (on change only), so typing is never lost.
      const runHref = (id) => `${base}/${encodeURIComponent(id)}`;
      const list = h("div", { id: "runs" });
      const problem = h("div", { class: "banner", role: "status", hidden: true });
      document.title = "runs · mcp-team";
      root.replaceChildren(h("h1", { class: "brand" }, "mcp-team"), problem, openRunForm(runHref), list);
      let last = null;
      poll(async () => {
        const { data } = await getJSON(`${base}.json`);
        const text = JSON.stringify(data);
        if (text !== last) list.replaceChildren(renderRunList(data.runs || [], { runHref }));
        last = text;
        return LIST_POLL_MS;
      }, (text) => { problem.hidden = !text; problem.textContent = text || ""; });
      return;
    }
    poll(async () => {
      const { data, missing } = await getJSON(`${base}.json`);
      if (missing !== undefined) {
        show(h("p", { class: "notice error", id: "notice" }, missing || `No run ${config.runId}.`, " ",
          h("a", { href: base.replace(/\/[^/]*$/, "") }, "All runs")));
        return 0;
      }
      showRun(data);
      return running() ? POLL_MS : 0;
    });
  }

  // ---- inside an MCP App frame
  function applyHostContext(ctx) {
    if (ctx.theme) applyTheme(ctx.theme);
    const vars = ctx.styles && ctx.styles.variables;
    for (const [name, value] of Object.entries(vars || {})) {
      if (name.startsWith("--") && value) document.documentElement.style.setProperty(name, value);
    }
  }

  /* A tool result holds a run record (run_team, get_run), only a run id (a tool that starts a run and
     returns), or for a failed run an error naming team://runs/{id}. */
  function runIn(toolResult) {
    const data = toolResult && toolResult.structuredContent;
    if (data && data.run_id) return Array.isArray(data.handoffs) ? { run: data } : { runId: String(data.run_id) };
    const text = ((toolResult && toolResult.content) || []).map((c) => c.text || "").join("\n");
    const id = /team:\/\/runs\/([A-Za-z0-9_-]+)/.exec(text);
    return { runId: id && id[1], text };
  }

  async function startApp() {
    if (window.parent === window) {
      notice("This is the MCP App view of mcp-team runs: a host that supports MCP Apps shows it next to run_team.");
      return;
    }
    applyTheme(dark.matches ? "dark" : "light");
    const bridge = window.McpAppBridge.createBridge({ name: "mcp-team run view", version: "1" });
    let request = null;
    let runId = null;
    let finished = false;
    let polling = false;

    const read = async (uri) => {
      const result = await bridge.request("resources/read", { uri });
      const content = (result.contents || [])[0] || {};
      return JSON.parse(content.text != null ? content.text : atob(content.blob || ""));
    };
    const follow = () => {
      if (polling || finished || !bridge.hostCapabilities.serverResources) return;
      polling = true;
      poll(async () => {
        if (finished) {
          polling = false;
          return 0;
        }
        if (!runId) {
          // The tool call has not said which run it is: the newest running run of this request is.
          const { runs = [] } = await read("team://runs");
          const mine = runs.find((r) => r.status === "running" && request && r.request === request.slice(0, r.request.length));
          if (mine) runId = mine.run_id;
        }
        if (runId) {
          showRun(await read(`team://runs/${runId}`));
          if (!running()) finished = true;
        }
        if (finished) polling = false;
        return finished ? 0 : POLL_MS;
      });
    };

    openLink = (e) => {
      if (!bridge.hostCapabilities.openLinks) return;  // let the frame try; a sandbox may block it
      e.preventDefault();
      bridge.request("ui/open-link", { url: e.currentTarget.href }).catch(() => {});
    };
    bridge.on("ui/notifications/host-context-changed", applyHostContext);
    bridge.on("ui/notifications/tool-input", (params) => {
      request = String((params.arguments || {}).request || "");
      if (!shown) notice(`Starting the team on: ${request}`);
      follow();
    });
    bridge.on("ui/notifications/tool-result", (result) => {
      const { run, runId: named, text } = runIn(result);
      if (run) {
        runId = run.run_id;
        finished = run.status !== "running";
        showRun(run);
        if (!finished) follow();  // a tool that returns while the run goes on
      } else if (named && bridge.hostCapabilities.serverResources) {
        runId = named;
        finished = false;
        follow();
      } else if (!shown || running()) {
        notice(text || "The tool returned no run record.", result && result.isError);
      }
    });
    bridge.on("ui/notifications/tool-cancelled", (params) => {
      finished = true;
      if (runId && bridge.hostCapabilities.serverResources) {
        read(`team://runs/${runId}`).then(showRun, () => {});
      } else if (!shown) {
        notice(`Cancelled${params.reason ? ": " + params.reason : ""}.`);
      }
    });
    const init = await bridge.connect();
    applyHostContext(init.hostContext || {});
    bridge.reportSize();
    if (!shown) notice("Waiting for the run to start…");
  }

  (config.mode === "app" ? startApp() : Promise.resolve(startHttp())).catch((e) => notice(`The view failed: ${e.message}`, true));
})();
