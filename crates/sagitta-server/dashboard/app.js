// SagittaDB's dashboard: plain JavaScript over the server's own REST API (the Qdrant
// endpoints and /metrics), no framework, nothing fetched from elsewhere.
"use strict";

const session = {
  key: sessionStorage.getItem("sagitta-api-key") || "",
  access: "open",
};
const view = document.getElementById("view");

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== false && value !== undefined) node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) node.append(child);
  return node;
}

async function call(method, path, body) {
  const headers = {};
  if (session.key) headers["api-key"] = session.key;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let answer = null;
  try { answer = JSON.parse(text); } catch (_) { /* /metrics is text */ }
  if (!response.ok) {
    const message = answer && answer.status && answer.status.error;
    throw new Error(message || `${response.status} ${response.statusText}`);
  }
  return answer === null ? text : answer.result;
}

const canWrite = () => session.access === "read-write" || session.access === "open";

async function refreshAccess() {
  const headers = session.key ? { "api-key": session.key } : {};
  const answer = await (await fetch("/dashboard/access", { headers })).json();
  session.access = answer.access;
  const badge = document.getElementById("access");
  badge.textContent = {
    open: "no key needed",
    "read-write": "read-write key",
    "read-only": "read-only key: writes disabled",
    refused: "key refused",
  }[session.access];
}

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  session.key = document.getElementById("key").value;
  sessionStorage.setItem("sagitta-api-key", session.key);
  await refreshAccess();
  route();
});

// ---------------------------------------------------------------------------------
// Collections

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) { n /= 1024; unit += 1; }
  return `${n.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function vectorsText(params) {
  const vectors = params.vectors || {};
  if (vectors.size) return `${vectors.size}-d ${vectors.distance}`;
  const named = Object.entries(vectors).map(([name, v]) => `${name}: ${v.size}-d ${v.distance}`);
  const sparse = Object.keys(params.sparse_vectors || {}).map((name) => `${name}: sparse`);
  return [...named, ...sparse].join(", ") || "none";
}

async function collectionsView() {
  const table = el("table", { id: "collections" },
    el("tr", {}, ...["name", "status", "points", "segments", "vectors", "RAM per vector", "disk", "disk per vector"]
      .map((h) => el("th", { text: h }))));
  const error = el("div", { class: "error", id: "collections-error" });
  view.replaceChildren(el("section", {}, el("h2", { text: "Collections" }), table, error));
  try {
    const listed = await call("GET", "/collections");
    for (const { name } of listed.collections) {
      const info = await call("GET", `/collections/${encodeURIComponent(name)}`);
      const storage = info.sagitta || {};
      const points = info.points_count || 0;
      const perVector = storage.ram_bytes_per_vector;
      table.append(el("tr", { "data-collection": name },
        el("td", {}, el("a", { href: `#/collection/${encodeURIComponent(name)}`, text: name })),
        el("td", { class: `status ${info.status}`, text: info.status }),
        el("td", { class: "points", text: String(points) }),
        el("td", { class: "segments", text: String(info.segments_count) }),
        el("td", { class: "vectors", text: vectorsText(info.config.params) }),
        el("td", { class: "ram", text: perVector ? `${perVector.toFixed(0)} B` : "–" }),
        el("td", { class: "disk", text: bytes(storage.disk_bytes) }),
        el("td", { class: "disk-per-vector", text: points && storage.disk_bytes ? `${(storage.disk_bytes / points).toFixed(0)} B` : "–" })));
    }
    if (!listed.collections.length) table.append(el("tr", {}, el("td", { class: "muted", text: "no collections yet" })));
  } catch (failure) {
    error.textContent = failure.message;
  }
}

// ---------------------------------------------------------------------------------
// One collection: the points browser and the search playground

/** The filter typed in `area`, or null; a message naming the problem when it is not JSON. */
function parseFilter(area) {
  const text = area.value.trim();
  if (!text) return null;
  let filter;
  try { filter = JSON.parse(text); } catch (failure) {
    throw new Error(`filter: not JSON (${failure.message})`);
  }
  if (typeof filter !== "object" || Array.isArray(filter) || filter === null) {
    throw new Error("filter: must be an object such as {\"must\": [...]}");
  }
  return filter;
}

function pointsBrowser(name) {
  const filter = el("textarea", { id: "filter", placeholder: '{"must": [{"key": "tag", "match": {"value": "red"}}]}' });
  const limit = el("input", { id: "limit", type: "number", value: "20", min: "1" });
  const table = el("table", { id: "points" });
  const error = el("div", { class: "error", id: "points-error" });
  const more = el("button", { id: "more", disabled: true, text: "Next page" });
  let offset = null;
  async function load(reset) {
    error.textContent = "";
    if (reset) { offset = null; table.replaceChildren(el("tr", {}, ...["id", "payload", ""].map((h) => el("th", { text: h })))); }
    try {
      const body = { limit: Number(limit.value), with_payload: true, filter: parseFilter(filter) };
      if (offset !== null) body.offset = offset;
      const page = await call("POST", `/collections/${encodeURIComponent(name)}/points/scroll`, body);
      for (const point of page.points) {
        const remove = el("button", {
          class: "delete-point", text: "Delete", disabled: !canWrite(),
          onclick: async () => {
            try {
              await call("POST", `/collections/${encodeURIComponent(name)}/points/delete?wait=true`, { points: [point.id] });
              row.remove();
            } catch (failure) { error.textContent = failure.message; }
          },
        });
        const row = el("tr", { "data-id": String(point.id) },
          el("td", { class: "point-id", text: String(point.id) }),
          el("td", {}, el("pre", { text: JSON.stringify(point.payload) })),
          el("td", {}, remove));
        table.append(row);
      }
      offset = page.next_page_offset;
      more.disabled = offset === null || offset === undefined;
    } catch (failure) {
      error.textContent = failure.message;
    }
  }
  more.addEventListener("click", () => load(false));
  const scroll = el("button", { id: "scroll", text: "Show points", onclick: () => load(true) });
  load(true);
  return el("section", {}, el("h2", { text: "Points" }),
    el("label", { text: "Filter (Qdrant's filter JSON)" }), filter,
    el("div", { class: "row" }, el("label", {}, "Limit ", limit), scroll, more), error, table);
}

function searchPlayground(name) {
  const vector = el("textarea", { id: "query-vector", placeholder: "[0.1, 0.2, ...] — or give a point id" });
  const pointId = el("input", { id: "query-id", placeholder: "point id" });
  const using = el("input", { id: "query-using", placeholder: "vector name (optional)" });
  const filter = el("textarea", { id: "search-filter", placeholder: "filter (optional)" });
  const ef = el("input", { id: "ef", type: "number", value: "64", min: "1" });
  const limit = el("input", { id: "search-limit", type: "number", value: "10", min: "1" });
  const hits = el("table", { id: "hits" });
  const error = el("div", { class: "error", id: "search-error" });
  async function search() {
    error.textContent = "";
    hits.replaceChildren(el("tr", {}, ...["id", "score", "payload"].map((h) => el("th", { text: h }))));
    try {
      let query;
      if (pointId.value.trim()) {
        const text = pointId.value.trim();
        query = /^\d+$/.test(text) ? Number(text) : text;
      } else {
        try { query = JSON.parse(vector.value); } catch (failure) {
          throw new Error(`query: the vector is not a JSON list of numbers (${failure.message})`);
        }
      }
      const body = { query, limit: Number(limit.value), with_payload: true, params: { hnsw_ef: Number(ef.value) } };
      const filterValue = parseFilter(filter);
      if (filterValue) body.filter = filterValue;
      if (using.value.trim()) body.using = using.value.trim();
      const answer = await call("POST", `/collections/${encodeURIComponent(name)}/points/query`, body);
      for (const hit of answer.points) {
        hits.append(el("tr", { "data-id": String(hit.id) },
          el("td", { class: "hit-id", text: String(hit.id) }),
          el("td", { class: "hit-score", text: hit.score.toFixed(4) }),
          el("td", {}, el("pre", { text: JSON.stringify(hit.payload) }))));
      }
    } catch (failure) {
      error.textContent = failure.message;
    }
  }
  return el("section", {}, el("h2", { text: "Search" }),
    el("label", { text: "Query vector" }), vector,
    el("div", { class: "row" }, el("label", {}, "or by point id ", pointId), el("label", {}, "using ", using)),
    el("label", { text: "Filter" }), filter,
    el("div", { class: "row" }, el("label", {}, "ef ", ef), el("label", {}, "limit ", limit),
      el("button", { id: "search", text: "Search", onclick: search })),
    error, hits);
}

async function collectionView(name) {
  const error = el("div", { class: "error" });
  const drop = el("button", {
    id: "drop-collection", text: "Delete collection", disabled: !canWrite(),
    onclick: async () => {
      if (!confirm(`Delete collection ${name} and all its points?`)) return;
      try { await call("DELETE", `/collections/${encodeURIComponent(name)}`); location.hash = "#/"; } catch (failure) { error.textContent = failure.message; }
    },
  });
  view.replaceChildren(
    el("section", {}, el("h2", { text: `Collection ${name}` }), el("div", { class: "row" }, drop), error),
    pointsBrowser(name), searchPlayground(name));
}

// ---------------------------------------------------------------------------------
// Live metrics from /metrics (Prometheus text), sampled every 2 s

const READ_ROUTES = /\/points\/(query|search|scroll|count)|\/facet|\/points"$/;

function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = line.match(/^([a-z_]+)(\{(.*)\})? (\S+)$/);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] || "").matchAll(/([a-z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    samples.push({ name: match[1], labels, value: Number(match[4]) });
  }
  return samples;
}

function summarize(samples) {
  let reads = 0; let upserted = 0; let segments = 0; let yellow = 0;
  const buckets = new Map();
  for (const { name, labels, value } of samples) {
    const isRead = labels.route && READ_ROUTES.test(`${labels.route}"`) && labels.method === "POST";
    if (name === "sagitta_http_requests_total" && isRead) reads += value;
    if (name === "sagitta_points_upserted_total") upserted += value;
    if (name === "sagitta_collection_segments") segments += value;
    if (name === "sagitta_collection_optimizer_state" && labels.state === "yellow") yellow += value;
    if (name === "sagitta_http_request_duration_seconds_bucket" && isRead) {
      const bound = labels.le === "+Inf" ? Infinity : Number(labels.le);
      buckets.set(bound, (buckets.get(bound) || 0) + value);
    }
  }
  return { at: performance.now() / 1000, reads, upserted, segments, yellow, buckets };
}

/** The `q` quantile (ms) of the requests between two cumulative histograms. */
function quantile(before, after, q) {
  const bounds = [...after.buckets.keys()].sort((a, b) => a - b);
  const total = (after.buckets.get(Infinity) || 0) - (before.buckets.get(Infinity) || 0);
  if (total <= 0) return null;
  for (const bound of bounds) {
    const count = after.buckets.get(bound) - (before.buckets.get(bound) || 0);
    if (count >= q * total) return bound === Infinity ? null : bound * 1000;
  }
  return null;
}

function drawChart(canvas, series, unit) {
  const context = canvas.getContext("2d");
  const width = canvas.width = canvas.clientWidth;
  const height = canvas.height = canvas.clientHeight;
  context.clearRect(0, 0, width, height);
  const values = series.flatMap((s) => s.points).filter((v) => v !== null);
  const top = (Math.max(0, ...values) || 1) * 1.1;
  context.font = "11px sans-serif";
  context.fillStyle = "#6b7385";
  context.fillText(`${top.toPrecision(3)} ${unit}`, 4, 12);
  series.forEach(({ points, color, label }, index) => {
    context.strokeStyle = color;
    context.fillStyle = color;
    context.fillText(label, width - 90, 14 + 13 * index);
    context.beginPath();
    points.forEach((value, i) => {
      if (value === null) return;
      const x = (i / Math.max(1, points.length - 1)) * (width - 8) + 4;
      const y = height - 4 - (value / top) * (height - 20);
      if (i === 0) context.moveTo(x, y); else context.lineTo(x, y);
    });
    context.stroke();
  });
}

// the samples so far (window.sagittaMetrics, for tests to read)
const metrics = { samples: [], timer: null };
window.sagittaMetrics = metrics;

async function sampleMetrics() {
  try {
    metrics.samples.push(summarize(parseMetrics(await call("GET", "/metrics"))));
    if (metrics.samples.length > 91) metrics.samples.shift();
    document.getElementById("metrics-error").textContent = "";
  } catch (failure) {
    document.getElementById("metrics-error").textContent = failure.message;
  }
  const pairs = metrics.samples.slice(1).map((after, i) => [metrics.samples[i], after]);
  const rate = (field) => pairs.map(([a, b]) => (b[field] - a[field]) / (b.at - a.at));
  drawChart(document.getElementById("qps"), [{ points: rate("reads"), color: "#2563eb", label: "searches/s" }], "req/s");
  drawChart(document.getElementById("latency"), [
    { points: pairs.map(([a, b]) => quantile(a, b, 0.5)), color: "#127a3a", label: "p50" },
    { points: pairs.map(([a, b]) => quantile(a, b, 0.99)), color: "#b00020", label: "p99" },
  ], "ms");
  drawChart(document.getElementById("writes"), [{ points: rate("upserted"), color: "#9a6b00", label: "points/s" }], "points/s");
  drawChart(document.getElementById("optimizer"), [
    { points: metrics.samples.map((s) => s.segments), color: "#6d28d9", label: "segments" },
    { points: metrics.samples.map((s) => s.yellow), color: "#9a6b00", label: "optimizing" },
  ], "");
  const last = metrics.samples[metrics.samples.length - 1];
  if (last) document.getElementById("metrics-now").textContent =
    `${last.reads} searches, ${last.upserted} points written, ${last.segments} sealed segments, ${last.yellow} collections optimizing`;
}

function metricsView() {
  const chart = (id, title) => el("div", {}, el("h2", { text: title }), el("canvas", { id }));
  view.replaceChildren(el("section", {},
    el("h2", { text: "Live metrics (every 2 s, from /metrics)" }),
    el("p", { id: "metrics-now", class: "muted" }),
    el("div", { class: "error", id: "metrics-error" }),
    el("div", { class: "charts" },
      chart("qps", "Search QPS"), chart("latency", "Search latency p50 / p99"),
      chart("writes", "Write rate"), chart("optimizer", "Optimizer: segments, collections optimizing"))));
  sampleMetrics();
  metrics.timer = setInterval(sampleMetrics, 2000);
}

// ---------------------------------------------------------------------------------

function route() {
  if (metrics.timer) { clearInterval(metrics.timer); metrics.timer = null; }
  const hash = location.hash || "#/";
  const collection = hash.match(/^#\/collection\/(.+)$/);
  if (collection) return collectionView(decodeURIComponent(collection[1]));
  if (hash === "#/metrics") return metricsView();
  return collectionsView();
}

window.addEventListener("hashchange", route);
document.getElementById("key").value = session.key;
refreshAccess().then(route, route);
