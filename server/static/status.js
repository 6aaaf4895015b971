// The status page: polls /api/status every two seconds and renders it (no framework, no build).
"use strict";

const $ = (sel) => document.querySelector(sel);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const num = (x) => (x === null || x === undefined ? "–" : Number(x).toLocaleString("en-US"));
const ms = (x) => (x === null || x === undefined ? "–" : `${Number(x).toFixed(1)} ms`);
const bytes = (b) => (b >= 1 << 30 ? `${(b / (1 << 30)).toFixed(2)} GiB` : b >= 1 << 20 ? `${(b / (1 << 20)).toFixed(1)} MiB`
  : `${(b / 1024).toFixed(1)} KiB`);

function when(t) {
  if (t === null || t === undefined) return "–";
  const d = new Date(Number(t));
  if ($("#utc").checked) return d.toISOString().replace("T", " ").replace("Z", " UTC");
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:` +
    `${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function cell(stream, field, html, cls = "") {
  return `<td data-stream="${esc(stream)}" data-field="${field}"${cls ? ` class="${cls}"` : ""}>${html}</td>`;
}

function renderStreams(streams) {
  const rows = streams.map((s) => {
    const size = s.subwindow_rows ? `${num(s.subwindow_rows)} rows` : `${num(s.subwindow_ms)} ms`;
    const pct = s.subwindows ? Math.round((100 * s.sealed) / s.subwindows) : 0;
    const fill = `<span class="fill" title="${s.sealed} of ${s.subwindows}"><span style="width:${pct}%"></span></span> ${s.sealed}/${s.subwindows}`;
    const windowText = s.window_start_ms === null ? "empty" : `${when(s.window_start_ms)} – ${when(s.window_end_ms)}`;
    return `<tr>${cell(s.name, "name", esc(s.name))}${cell(s.name, "clock", esc(s.clock))}${cell(s.name, "subwindow", size)}` +
      `${cell(s.name, "fill", fill)}${cell(s.name, "latest_slide", num(s.latest_slide))}${cell(s.name, "window", windowText)}` +
      `${cell(s.name, "window_rows", num(s.window_rows))}${cell(s.name, "buffered_rows", num(s.buffered_rows))}` +
      `${cell(s.name, "bytes", bytes(s.bytes))}${cell(s.name, "late_rows", num(s.late_rows))}` +
      `${cell(s.name, "slides", num(s.slides))}${cell(s.name, "queries", num(s.queries))}${cell(s.name, "aborts", num(s.aborts))}` +
      `${cell(s.name, "staleness", `${ms(s.staleness_ms.p50)} / ${ms(s.staleness_ms.p99)}`)}` +
      `${s.stopped ? cell(s.name, "state", `stopped: ${esc(s.stopped)}`, "stopped") : cell(s.name, "state", "running")}</tr>`;
  });
  $("#streams tbody").innerHTML = rows.join("") || `<tr><td colspan="15">no streams yet</td></tr>`;
}

function chart(title, ts, series) {
  const w = 360, h = 110, pad = 28;
  const values = series.flatMap((s) => s.values).filter((v) => v !== null && v !== undefined);
  const max = Math.max(1e-9, ...values);
  const t0 = ts[0], t1 = ts[ts.length - 1] || t0 + 1;
  const x = (t) => pad + ((w - pad - 4) * (t - t0)) / Math.max(1, t1 - t0);
  const y = (v) => h - 16 - ((h - 26) * v) / max;
  const lines = series.map((s) => {
    const pts = s.values.map((v, i) => (v === null || v === undefined ? null : `${x(ts[i]).toFixed(1)},${y(v).toFixed(1)}`))
      .filter(Boolean).join(" ");
    return `<polyline fill="none" stroke="${s.color}" stroke-width="1.6" points="${pts}"><title>${esc(s.name)}</title></polyline>`;
  });
  const legend = series.map((s, i) => `<text x="${pad + 110 * i}" y="${h - 2}" font-size="10" fill="${s.color}">${esc(s.name)}</text>`);
  return `<div class="chart"><h3>${esc(title)}</h3><svg width="${w}" height="${h}" role="img" aria-label="${esc(title)}">` +
    `<line x1="${pad}" y1="${h - 16}" x2="${w}" y2="${h - 16}" stroke="#ccd"/>` +
    `<text x="0" y="12" font-size="10" fill="#667">${max.toPrecision(3)}</text>` +
    `<text x="0" y="${h - 16}" font-size="10" fill="#667">0</text>${lines.join("")}${legend.join("")}</svg></div>`;
}

function renderCharts(history) {
  const ts = history.t;
  if (ts.length < 2) {
    $("#charts").innerHTML = `<p class="hint">collecting samples (one every two seconds)…</p>`;
    return;
  }
  const out = [];
  for (const [name, s] of Object.entries(history.streams).sort()) {
    out.push(chart(`${name}: staleness (ms)`, ts, [{name: "p50", values: s.staleness_p50, color: "#3b82c4"},
      {name: "p99", values: s.staleness_p99, color: "#c47a3b"}]));
    const perSample = (arr) => arr.map((v, i) => (i === 0 || v === null || arr[i - 1] === null ? null : v - arr[i - 1]));
    out.push(chart(`${name}: aborts and queries per sample`, ts, [{name: "aborts", values: perSample(s.aborts), color: "#c0392b"},
      {name: "queries", values: perSample(s.queries), color: "#2e8b57"}]));
  }
  $("#charts").innerHTML = out.join("");
}

function renderQueries(queries) {
  $("#queries").innerHTML = queries.map((q) => {
    const a = q.latest;
    let body = `<p class="hint">no answer yet</p>`;
    if (a) {
      const head = a.columns.map((c) => `<th>${esc(c)}</th>`).join("");
      const rows = a.rows.map((r) => `<tr>${r.map((v) => `<td>${v === null ? "null" : esc(v)}</td>`).join("")}</tr>`).join("");
      body = `<div class="hint">slide ${num(a.slide)} · window ${when(a.window_start_ms)} – ${when(a.window_end_ms)} · staleness ` +
        `${ms(a.staleness_ms)}${a.rows_total > a.rows.length ? ` · first ${a.rows.length} of ${num(a.rows_total)} rows` : ""}</div>` +
        `<table><thead><tr>${head}</tr></thead><tbody>${rows}</tbody></table>`;
    }
    return `<div class="query" data-query="${esc(q.id)}"><b>${esc(q.id)}</b> every ${q.every_slides} slide(s): <code>${esc(q.text)}</code>${body}</div>`;
  }).join("") || `<p class="hint">none registered</p>`;
}

async function refresh() {
  try {
    const r = await fetch("api/status", {cache: "no-store"});
    const s = await r.json();
    if (!r.ok) throw new Error(s.error || r.statusText);
    const h = $("#health");
    h.textContent = s.health.ready ? "ready" : `not ready: ${s.health.reason}`;
    h.className = `badge ${s.health.ready ? "ok" : "bad"}`;
    $("#policy").textContent = `policy ${s.policy}`;
    const d = s.durability;
    $("#durability").textContent = d.enabled ? `fsync ${d.fsync} · log lsn ${num(d.last_lsn)} · ${num(d.snapshots)} snapshots` +
      (d.write_failure ? ` · WRITES FAILING: ${d.write_failure}` : "") : "in memory (nothing on disk)";
    $("#updated").textContent = when(s.time_ms);
    renderStreams(s.streams);
    renderCharts(s.history);
    renderQueries(s.queries);
    document.body.dataset.loaded = "1";
  } catch (e) {
    const h = $("#health");
    h.textContent = `server not answering: ${e.message}`;
    h.className = "badge bad";
  }
}

$("#utc").addEventListener("change", refresh);
refresh();
setInterval(refresh, 2000);
