/* render.js: draws a run record (the JSON of team://runs/{id}) and the list of runs as DOM.
 *
 * Data in, elements out; no state and no I/O (main.js does those). Text from the record is always set
 * as text, never parsed as HTML: outputs are model text. Fields the view does not know yet are shown
 * too, under "more", so a newer record still reads well; to give a new field its own place, add an
 * entry to COLUMNS (the line of a handoff) or FIELDS (its details).
 */
"use strict";
(function () {
  const SVG = "http://www.w3.org/2000/svg";

  function h(tag, attrs, ...children) {
    const svg = tag.startsWith("svg:");
    const el = svg ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "style") for (const [p, val] of Object.entries(v)) el.style.setProperty(p, String(val));
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
    }
    return el;
  }

  // ---- formatting
  const when = (s) => { const t = Date.parse(s || ""); return Number.isFinite(t) ? t : null; };
  const int = (n) => Number(n || 0).toLocaleString("en-US");
  function duration(ms) {
    if (ms == null || !Number.isFinite(ms)) return "–";
    const s = Math.max(ms, 0) / 1000;
    if (s < 10) return s.toFixed(1) + "s";
    if (s < 60) return Math.round(s) + "s";
    const m = Math.floor(s / 60), r = Math.round(s % 60);
    if (m < 60) return `${m}m ${String(r).padStart(2, "0")}s`;
    return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, "0")}m`;
  }
  const tokens = (u) => (u ? (u.input_tokens || 0) + (u.output_tokens || 0) : 0);
  function usageText(u) {
    if (!u) return "–";
    let text = `${int(u.input_tokens)} in · ${int(u.output_tokens)} out`;
    if (u.cache_read_input_tokens) text += ` · ${int(u.cache_read_input_tokens)} cache read`;
    if (u.cache_creation_input_tokens) text += ` · ${int(u.cache_creation_input_tokens)} cache write`;
    return text;
  }
  /* A cost: a number (USD), or {amount|total, currency}. Unknown (null: a model without a price, a call cut off) is
     "—", never $0; so is a handoff's while it runs (its calls so far are not its cost). */
  function costOf(x) {
    if (!x || typeof x !== "object") return null;
    for (const c of [x.cost, x.usage && x.usage.cost, x.cost_usd, x.usage && x.usage.cost_usd]) {
      if (c != null) return c;
    }
    return null;
  }
  const UNKNOWN = "—";
  function money(c) {
    if (c == null) return UNKNOWN;
    if (typeof c === "number") return "$" + (c < 0.01 && c > 0 ? c.toPrecision(2) : c.toFixed(c < 10 ? 4 : 2));
    if (c && typeof c === "object") {
      const amount = c.amount ?? c.total ?? c.value ?? c.usd;
      const currency = c.currency || (c.usd != null ? "USD" : "");
      if (typeof amount === "number") return (currency && currency !== "USD" ? currency + " " : "$") + amount.toFixed(4);
    }
    return String(c);
  }
  const handoffCost = (x) => (x.status === "running" ? UNKNOWN : money(costOf(x)));
  const ran = (x) => x.status !== "refused" && x.status !== "skipped";
  /* Nothing worth a row or a section: null, "", [] or {}. */
  const isEmpty = (v) => v == null || v === "" || (Array.isArray(v) ? v.length === 0 : typeof v === "object" && Object.keys(v).length === 0);
  const badge = (status, text) => h("span", { class: `badge ${status}` }, text || status);
  const isRun = (v) => v && typeof v === "object" && Array.isArray(v.handoffs) && "status" in v;

  function longText(text, key, opts = {}) {
    text = String(text ?? "");
    const short = text.length <= (opts.limit || 240) && text.split("\n").length <= 4;
    if (short && !opts.collapsed) return text || "–";
    const firstLine = text.split("\n").find((l) => l.trim()) || "";
    const preview = firstLine.length > 90 ? firstLine.slice(0, 89) + "…" : firstLine;
    return h("details", { class: "long", "data-key": key },
      h("summary", {}, `${preview} (${int(text.length)} chars)`),
      h("pre", { class: "text" }, text));
  }

  function extra(value, key, ctx) {
    if (isRun(value)) return h("div", { class: "nested" }, renderRun(value, { ...ctx, prefix: `${ctx.prefix}${value.run_id}-` }));
    if (value == null) return "–";
    if (typeof value === "string") return longText(value, key);
    if (typeof value !== "object") return String(value);
    return h("pre", { class: "text" }, JSON.stringify(value, null, 2));
  }

  // ---- the line and the details of one handoff
  const COLUMNS = [
    { cls: "id", text: (x) => x.id },
    { cls: "target", text: (x) => x.target },
    { cls: "status", node: (x) => badge(x.status, x.status + (x.error_type && x.status !== "completed" ? ` · ${x.error_type}` : "")) },
    { cls: "attempt", show: (x) => x.attempt > 1, text: (x) => `↻ attempt ${x.attempt}` + (x.retry_of ? ` (after ${x.retry_of})` : "") },
    { cls: "duration", text: (x, c) => duration(c.end - c.start) },
    { cls: "tokens", k: "tokens", text: (x) => int(tokens(x.usage)) },
    { cls: "cost", k: "cost", show: ran, text: handoffCost },
    { cls: "verdict", show: (x) => x.verdict, text: (x) => x.verdict.verdict },
  ];
  const FIELDS = [
    { key: "task", label: "Task", long: true },
    { key: "expected_output", label: "Expected output", long: true },
    { key: "context", label: "Context", long: true, collapsed: true },
    { key: "output", label: "Result", long: true, collapsed: true },
    { key: "error", label: "Error", cls: "error" },
    { key: "verdict", label: "Review", render: (v) => [v.verdict, ...(v.reasons || []).map((r) => "\n- " + r)].join("") },
    { key: "usage", label: "Tokens", render: usageText },
    { key: "cost", label: "Cost", render: money },
    { key: "turns", label: "Turns" },
    { key: "source", label: "From", show: (v) => v !== "supervisor" },
    { key: "call_id", label: "Call" },
    { key: "started_at", label: "Started", render: (v) => new Date(v).toLocaleTimeString() },
  ];
  const SHOWN_ELSEWHERE = ["id", "run_id", "target", "status", "attempt", "retry_of", "ended_at", "error_type"];
  const KNOWN_HANDOFF = new Set([...FIELDS.map((f) => f.key), ...SHOWN_ELSEWHERE]);

  function handoffCard(x, span, ctx) {
    const key = `${ctx.runId}:${x.id}`;
    const line = COLUMNS.filter((c) => !c.show || c.show(x)).map((c) =>
      h("span", { class: `col ${c.cls}` }, c.k ? h("span", { class: "k" }, c.k) : null, c.node ? c.node(x, span) : c.text(x, span)));
    const rows = [];
    for (const f of FIELDS) {
      const v = x[f.key];
      if (v == null || v === "" || (f.show && !f.show(v))) continue;
      const shown = f.render ? f.render(v) : f.long ? longText(v, `${key}:${f.key}`, f) : String(v);
      rows.push(h("dt", {}, f.label), h("dd", { class: f.cls }, shown));
    }
    for (const [k, v] of Object.entries(x)) {
      if (KNOWN_HANDOFF.has(k) || isEmpty(v)) continue;
      rows.push(h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, extra(v, `${key}:${k}`, ctx)));
    }
    const firstLine = String(x.task || "").split("\n")[0];
    return h("details", { class: `handoff ${x.status}`, id: `${ctx.prefix}handoff-${x.id}`, "data-key": key },
      h("summary", {}, line, h("span", { class: "task-line" }, firstLine)),
      h("dl", { class: "fields" }, rows));
  }

  // ---- timeline
  function intervals(run, now) {
    const t0 = when(run.started_at) ?? now;
    const live = run.status === "running";
    let tEnd = live ? now : when(run.ended_at);
    const spans = (run.handoffs || []).map((x) => {
      const start = when(x.started_at) ?? t0;
      const end = when(x.ended_at) ?? (x.status === "running" ? null : start);
      return { x, start, end };
    });
    const latest = Math.max(t0, ...spans.map((s) => Math.max(s.start, s.end ?? s.start)));
    if (tEnd == null || tEnd < latest) tEnd = latest;
    for (const s of spans) if (s.end == null) s.end = tEnd;
    return { t0, tEnd, live, spans };
  }

  function supervisorSegments(run, t) {
    if (Array.isArray(run.supervisor_turns)) {  // when the record carries them; else derive them from the gaps
      return run.supervisor_turns.map((s, i) => ({
        start: when(s.started_at) ?? t.t0, end: when(s.ended_at) ?? t.tEnd, label: s.phase || s.kind || `turn ${i + 1}`, live: !s.ended_at,
      }));
    }
    const busy = t.spans.filter((s) => s.end > s.start).sort((a, b) => a.start - b.start);
    const gaps = [];
    let cursor = t.t0;
    for (const s of busy) {
      if (s.start > cursor) gaps.push([cursor, s.start]);
      cursor = Math.max(cursor, s.end);
    }
    const tail = t.tEnd > cursor ? [cursor, t.tEnd] : null;
    const min = (t.tEnd - t.t0) * 0.004;
    const planned = run.mode === "planned";
    // A gap that ends where a retry starts is the supervisor rewriting the failed task.
    const refines = (end) => t.spans.some((s) => s.x.retry_of && Math.abs(s.start - end) <= Math.max(min, 50));
    let turn = 0;
    const segments = gaps.filter(([a, b]) => b - a > min).map(([start, end], i) => {
      const label = i > 0 && refines(end) ? "refine" : planned ? (i === 0 ? "plan" : "supervisor") : `turn ${++turn}`;
      return { start, end, label };
    });
    if (tail && (tail[1] - tail[0] > min || t.live)) {
      const running = t.spans.some((s) => s.x.status === "running");
      if (!running) {
        const first = segments.length === 0 && busy.length === 0;
        segments.push({
          start: tail[0], end: tail[1], live: t.live,
          label: t.live ? (run.waiting ? "waiting" : first ? (planned ? "plan" : "turn 1") : "thinking") : first ? "answer" : "synthesis",
        });
      }
    }
    return segments;
  }

  function pack(bars) {
    const rowsEnd = [];
    for (const b of bars.sort((a, b) => a.start - b.start || a.end - b.end)) {
      let row = rowsEnd.findIndex((end) => end <= b.start);
      if (row < 0) row = rowsEnd.length;
      rowsEnd[row] = Math.max(b.end, b.start + 1);
      b.row = row;
    }
    return Math.max(rowsEnd.length, 1);
  }

  function ticks(total) {
    const steps = [100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 18e5, 36e5];
    const step = steps.find((s) => total / s <= 6) || total / 4;
    const label = (ms) => ms === 0 ? "0" : ms < 6e4 ? (step < 1e3 ? (ms / 1e3).toFixed(1) : ms / 1e3) + "s" : duration(ms);
    const out = [];
    for (let ms = 0; ms <= total; ms += step) out.push({ ms, label: label(ms) });
    return out;
  }

  function timeline(run, t, ctx) {
    const total = Math.max(t.tEnd - t.t0, 1);
    const pct = (ms) => `${Math.min(Math.max(((ms - t.t0) / total) * 100, 0), 100)}%`;
    const width = (a, b) => `${Math.max(((b - a) / total) * 100, 0)}%`;
    const lanes = new Map([["supervisor", []]]);
    for (const s of t.spans) {
      if (!lanes.has(s.x.target)) lanes.set(s.x.target, []);
      lanes.get(s.x.target).push({ ...s });
    }
    const rows = [];
    const tickList = ticks(total);
    rows.push(h("div", { class: "axis" }, h("span", {}),
      h("div", { class: "ticks" }, tickList.map((tk, i) => h("span", { class: i ? "tick" : "tick first", style: { left: `${(tk.ms / total) * 100}%` } }, tk.label)))));
    for (const [name, bars] of lanes) {
      let nodes;
      let count = bars.length;
      let laneRows = 1;
      if (name === "supervisor") {
        const segs = supervisorSegments(run, t);
        count = segs.length;
        nodes = segs.map((s) => h("span", {
          class: "bar supervisor" + (s.live ? " live" : ""), style: { left: pct(s.start), width: width(s.start, s.end), "--row": 0 },
          title: `supervisor: ${s.label}, ${duration(s.end - s.start)} (the time between handoffs)`,
        }, h("span", { class: "label" }, s.label)));
      } else {
        laneRows = pack(bars);
        nodes = bars.map((b) => {
          const x = b.x;
          const mark = { completed: "✓", failed: "✗", running: "…", cancelled: "■", refused: "⊘", skipped: "⊘" }[x.status] || "";
          const why = x.error ? `: ${x.error_type || ""} ${x.error}` : "";
          // Every bar at its true length, however short (a handoff refused at once takes no time): its label goes
          // beside it when it does not fit in it (fitLabels, once the page is laid out).
          return h("button", {
            type: "button", class: `bar ${x.status}${x.attempt > 1 ? " retry" : ""}`, "data-handoff": x.id,
            style: { left: pct(b.start), width: width(b.start, b.end), "--row": b.row },
            title: `${x.id} ${x.target} ${x.status}${why}\nattempt ${x.attempt}${x.retry_of ? " (retry of " + x.retry_of + ")" : ""} · ${duration(b.end - b.start)} · ${int(tokens(x.usage))} tokens\n${String(x.task || "").slice(0, 200)}`,
            onclick: () => ctx.focus(x.id),
          }, h("span", { class: "label" }, `${x.attempt > 1 ? "↻ " : ""}${x.id} ${mark}${x.status === "failed" && x.error_type ? " " + x.error_type : ""}`));
        });
      }
      rows.push(h("div", { class: "lane", "data-lane": name },
        h("div", { class: "lane-label", title: name }, name, " ", h("small", {}, count ? `${count}` : "")),
        h("div", { class: "track", style: { "--rows": laneRows } }, nodes)));
    }
    return h("div", { class: "timeline" },
      h("div", { class: "grid" }, tickList.slice(1).map((tk) => h("span", { style: { left: `${(tk.ms / total) * 100}%` } }))),
      rows);
  }

  /* Once the page is laid out: a bar whose label does not fit in it gets the label beside it (after it, or before
     it near the end of the track), and each lane's bars are packed into rows by what they cover on screen, label
     included, so no label sits on another bar. Run it again when the width changes. */
  function fitLabels(root) {
    for (const track of root.querySelectorAll(".timeline .track")) {
      const width = track.clientWidth;
      const bars = [...track.querySelectorAll(":scope > .bar")];
      const spans = bars.map((bar) => {
        bar.classList.remove("outside", "before");
        const label = bar.querySelector(".label");
        const left = bar.offsetLeft, right = left + bar.offsetWidth;
        const need = label ? label.scrollWidth : 0;
        if (!label || need <= bar.clientWidth - 6) return { bar, from: left, to: right };
        bar.classList.add("outside");
        if (right + 4 + need <= width || left - 4 - need < 0) return { bar, from: left, to: right + 4 + need };
        bar.classList.add("before");
        return { bar, from: left - 4 - need, to: right };
      });
      const rowsEnd = [];
      for (const span of spans.sort((a, b) => a.from - b.from)) {
        let row = rowsEnd.findIndex((end) => end + 3 <= span.from);
        if (row < 0) row = rowsEnd.length;
        rowsEnd[row] = span.to;
        span.bar.style.setProperty("--row", String(row));
      }
      track.style.setProperty("--rows", String(Math.max(rowsEnd.length, 1)));
    }
  }

  // ---- plan graph (planned mode): tasks in columns by dependency depth
  function planGraph(plan, handoffs) {
    const tasks = plan.tasks || [];
    const byId = new Map(tasks.map((tk) => [tk.id, tk]));
    const depth = new Map();
    const depthOf = (id, seen = new Set()) => {
      if (depth.has(id)) return depth.get(id);
      if (seen.has(id) || !byId.has(id)) return 0;
      seen.add(id);
      const d = Math.max(-1, ...(byId.get(id).depends_on || []).map((p) => depthOf(p, seen))) + 1;
      depth.set(id, d);
      return d;
    };
    const columns = [];
    for (const tk of tasks) (columns[depthOf(tk.id)] ||= []).push(tk);
    const W = 128, H = 38, GX = 34, GY = 10, P = 4;
    const pos = new Map();
    columns.forEach((col, c) => col.forEach((tk, r) => pos.set(tk.id, { x: P + c * (W + GX), y: P + r * (H + GY) })));
    const width = P * 2 + columns.length * W + (columns.length - 1) * GX;
    const height = P * 2 + Math.max(...columns.map((c) => c.length)) * (H + GY) - GY;
    const status = (id) => { const hs = handoffs.filter((x) => x.call_id === id); return hs.length ? hs[hs.length - 1].status : "pending"; };
    const cut = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
    const edges = [];
    for (const tk of tasks) for (const dep of tk.depends_on || []) {
      const a = pos.get(dep), b = pos.get(tk.id);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      edges.push(h("svg:path", { class: "edge", d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 3},${y2} l-4,-3 m4,3 l-4,3` }));
    }
    const nodes = tasks.map((tk) => {
      const p = pos.get(tk.id);
      return h("svg:g", { class: `node ${status(tk.id)}`, transform: `translate(${p.x},${p.y})`, "data-task": tk.id },
        h("svg:title", {}, `${tk.id} → ${tk.specialist} (${status(tk.id)})\n${tk.description}`),
        h("svg:rect", { width: W, height: H, rx: 4 }),
        h("svg:text", { x: 6, y: 15 }, cut(`${tk.id} · ${tk.specialist}`, 20)),
        h("svg:text", { x: 6, y: 30, class: "sub" }, cut(status(tk.id), 20)));
    });
    return h("section", { class: "plan" }, h("h2", {}, `Plan · ${tasks.length} tasks`),
      h("svg:svg", { viewBox: `0 0 ${width} ${height}`, width, style: { "max-width": `${width}px` }, role: "img", "aria-label": "plan graph" }, edges, nodes),
      plan.combine ? h("p", { class: "combine" }, "Combine: ", plan.combine) : null);
  }

  // ---- the run
  const KNOWN_RUN = new Set(["answer", "status", "handoffs", "failures", "usage", "run_id", "trace_id", "request", "mode",
    "plan", "stopped_by", "started_at", "ended_at", "cost", "supervisor_turns", "waiting", "notes"]);

  /* A run that waits for a person (get_run's `waiting`): which checkpoint, which round, what is to be approved. */
  const checkpointName = (w) => w.name + (w.round > 1 ? ` (round ${w.round})` : "");
  function waitingBox(w) {
    return h("section", { class: "waiting", "data-checkpoint": w.name, "data-round": w.round },
      h("h2", {}, "Waiting for a person"),
      h("p", {}, "At checkpoint ", h("strong", {}, checkpointName(w)), ": nothing goes on until someone answers it ",
        "(the ", h("code", {}, "answer_checkpoint"), " tool: approve, revise with feedback, or reject)."),
      h("pre", { class: "text" }, String(w.summary || "")));
  }

  function renderRun(run, ctx) {
    ctx = { prefix: "", ...ctx, runId: run.run_id };
    ctx.focus = (id) => ctx.focusHandoff && ctx.focusHandoff(`${ctx.prefix}handoff-${id}`);
    const now = ctx.now ?? Date.now();
    const t = intervals(run, now);
    const hs = run.handoffs || [];
    const count = (s) => hs.filter((x) => x.status === s).length;
    const done = count("completed"), failed = count("failed"), running = count("running");
    const other = hs.length - done - failed - running;
    const totals = [
      ["Time", duration(t.tEnd - t.t0)],
      ["Handoffs", `${hs.length}` + (hs.length ? ` (${[done && done + " ✓", failed && failed + " ✗", running && running + " running", other && other + " not run"].filter(Boolean).join(" · ")})` : "")],
      ["Tokens", int(tokens(run.usage && run.usage.total)), usageText(run.usage && run.usage.total)],
      ["Model calls", int(run.usage && run.usage.model_calls)],
    ];
    const cost = costOf(run) ?? costOf(run.usage || {}) ?? costOf((run.usage || {}).total);
    totals.push(["Cost", run.status === "running" ? UNKNOWN : money(cost), cost == null ? "unknown: a model without a price, or a call cut off" : null]);
    totals.push(["Mode", run.mode || "–"]);
    const trace = run.trace_id
      ? [" · trace ", ctx.traceUrl
        ? h("a", { href: ctx.traceUrl.replace("{trace_id}", encodeURIComponent(run.trace_id)), target: "_blank", rel: "noopener noreferrer", class: "trace", onclick: ctx.openLink }, run.trace_id)
        : h("code", { class: "trace" }, run.trace_id)]
      : null;
    const head = h("header", { class: "head", "data-status": run.status },
      h("div", { class: "title" }, badge(run.status), h("span", { class: "request", title: run.request }, String(run.request || "").slice(0, 300))),
      h("dl", { class: "totals" }, totals.map(([k, v, title]) => h("div", { "data-total": k.toLowerCase().replace(" ", "-"), title }, h("dt", {}, k), h("dd", {}, v)))),
      h("div", { class: "ids" }, "run ", h("code", {}, run.run_id), trace));

    const problems = [];
    if (run.stopped_by) problems.push(h("li", { class: "stop" }, "Stopped early: ", run.stopped_by));
    for (const f of run.failures || []) {
      const ref = f.handoff_id ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); ctx.focus(f.handoff_id); } }, f.handoff_id) : null;
      problems.push(h("li", { class: f.recovered ? "failure recovered" : "failure", "data-kind": f.kind },
        ref, ref ? " " : "", h("strong", {}, f.specialist), ` · ${f.kind}: ${f.reason}`, f.recovered ? " (recovered)" : ""));
    }
    const sections = [head];
    if (run.waiting && run.status === "running") sections.push(waitingBox(run.waiting));
    if (problems.length) sections.push(h("ul", { class: "problems" }, problems));
    const notes = (run.notes || []).filter((n) => !isEmpty(n));
    if (notes.length) sections.push(h("section", { class: "notes" }, h("h2", {}, "Notes"), h("ul", {}, notes.map((n) => h("li", {}, String(n))))));
    if (run.plan && (run.plan.tasks || []).length) sections.push(planGraph(run.plan, hs));
    sections.push(h("section", { class: "timeline-box" }, h("h2", {}, "Timeline"), timeline(run, t, ctx)));
    if (hs.length) {
      const spanOf = new Map(t.spans.map((s) => [s.x.id, s]));
      sections.push(h("section", { class: "handoffs" }, h("h2", {}, `Handoffs · ${hs.length}`), hs.map((x) => handoffCard(x, spanOf.get(x.id), ctx))));
    }
    // A finished run's answer is what its reader came for: shown whole, open.
    if (run.answer) sections.push(h("section", { class: "answer" }, h("h2", {}, "Answer"), h("pre", { class: "text" }, String(run.answer))));
    const more = Object.entries(run).filter(([k, v]) => !KNOWN_RUN.has(k) && !isEmpty(v));
    if (more.length) {
      sections.push(h("section", { class: "more" }, h("h2", {}, "More"),
        h("dl", { class: "fields" }, more.map(([k, v]) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, extra(v, `${run.run_id}:${k}`, ctx))]))));
    }
    return h("article", { class: "run", "data-run": run.run_id, "data-status": run.status }, sections);
  }

  function openRunForm(runHref) {
    const form = h("form", { class: "open-run" },
      h("input", { name: "run", placeholder: "open a run by id", "aria-label": "run id", autocomplete: "off" }),
      h("button", { type: "submit" }, "Open"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const id = form.elements.run.value.trim();
      if (id) location.href = runHref(id);
    });
    return form;
  }

  function renderRunList(runs, ctx) {
    const rows = runs.map((r) => h("tr", { "data-run": r.run_id, "data-status": r.status, "data-waiting": r.waiting && r.waiting.name },
      h("td", {}, badge(r.status), r.waiting
        ? [" ", h("span", { class: "badge waiting", title: r.waiting.summary }, `waits at ${checkpointName(r.waiting)}`)] : null),
      h("td", { class: "req" }, h("a", { href: ctx.runHref(r.run_id) }, String(r.request || "(no request)").slice(0, 160))),
      h("td", { class: "when" }, r.started_at ? new Date(r.started_at).toLocaleString() : ""),
      h("td", { class: "when" }, h("code", {}, String(r.run_id).slice(0, 8)))));
    return h("section", { class: "run-list" }, h("h2", {}, `Runs · ${runs.length}`),
      runs.length ? h("table", { class: "runs" }, h("tbody", {}, rows)) : h("p", { class: "notice" }, "No runs yet. Runs show here as they start."));
  }

  window.RunView = { h, renderRun, renderRunList, openRunForm, duration, fitLabels };
})();
