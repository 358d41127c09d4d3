/* courtly status page: polls the JSON API and draws the overview, hosts,
 * review queue, recent decisions and URL history.
 *
 * Rules: only same-origin requests (the server's CSP forbids anything else);
 * every value from the crawl is inserted as text, never as HTML (URLs and host
 * names come from the web); the host table is sorted, searched and paged by
 * the server; samples for the charts live in a client-side ring buffer.
 */
"use strict";

(function () {
  const SNAPSHOT_MS = 1500;
  const TABLE_MS = 3000;
  const RING = new Charts.Ring(600); // 15 minutes at 1.5 s
  const SPAN_S = 300;

  // ---- formatting -------------------------------------------------------------
  const fmt = {
    int: (v) => Math.round(v).toLocaleString("en-US"),
    bytes: (v) => {
      const u = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0;
      while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
      return (i ? v.toFixed(1) : Math.round(v)) + " " + u[i];
    },
    secs: (v) => (v < 1 ? Math.round(v * 1000) + " ms" : v < 120 ? v.toFixed(v < 10 ? 2 : 1) + " s"
      : v < 7200 ? Math.round(v / 60) + " min" : v < 172800 ? (v / 3600).toFixed(1) + " h" : (v / 86400).toFixed(1) + " d"),
    pct: (v) => (v * 100).toFixed(v < 0.1 ? 2 : 1) + " %",
    rate: (v) => v.toFixed(v < 10 ? 2 : 1) + "/s",
    compact: (v) => (v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e4 ? Math.round(v / 1e3) + "k" : v >= 1000 ? (v / 1e3).toFixed(1) + "k" : String(Math.round(v * 100) / 100)),
  };
  const when = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z" : "–");
  const clock = (t) => (t ? new Date(t * 1000).toISOString().slice(11, 19) : "–");

  function histQuantile(q, le, counts) {
    const total = counts[counts.length - 1];
    if (!total) return null;
    const rank = q * total;
    let prevB = 0, prevC = 0;
    for (let i = 0; i < counts.length; i++) {
      const b = i < le.length ? le[i] : Infinity;
      if (counts[i] >= rank) {
        if (b === Infinity) return le.length ? le[le.length - 1] : null;
        if (counts[i] === prevC) return b;
        return prevB + ((b - prevB) * (rank - prevC)) / (counts[i] - prevC);
      }
      prevB = b; prevC = counts[i];
    }
    return null;
  }

  const sum = (o) => Object.values(o || {}).reduce((a, b) => a + (b || 0), 0);
  const lat = (s, q) => { const h = s.fetch_latency_s || {}; return h.counts ? histQuantile(q, h.le, h.counts) : null; };
  const renderTime = (s, q) => { const h = s.render.render_s; return h.count ? histQuantile(q, h.le, h.counts) : null; };
  const sumOrNull = (o) => (o && Object.keys(o).length ? sum(o) : null);   // absent series: no figure

  // Each tile names the Prometheus series it shows, so a test (or a curious
  // operator) can compare the page with /metrics.
  const TILES = [
    { label: "Pages requested", metric: "courtly_fetches_total", labels: { kind: "page" }, get: (s) => s.fetches.page, f: fmt.int },
    { label: "robots.txt requested", metric: "courtly_fetches_total", labels: { kind: "robots" }, get: (s) => s.fetches.robots, f: fmt.int },
    { label: "Request rate (1 min)", get: () => recentRate("pages"), f: fmt.rate },
    { label: "Bytes fetched", metric: "courtly_bytes_fetched_total", get: (s) => s.bytes_fetched, f: fmt.bytes },
    { label: "Errors", metric: "courtly_errors_total", get: (s) => s.errors, f: fmt.int, warn: (v) => v > 0 },
    { label: "Not fetched", metric: "courtly_decisions_total", sum: true, get: (s) => sum(s.decisions), f: fmt.int },
    { label: "Queued URLs", metric: "courtly_frontier_queued_urls", get: (s) => s.frontier.queued_urls, f: fmt.int },
    { label: "Hosts ready", metric: "courtly_frontier_hosts", labels: { state: "ready" }, get: (s) => s.frontier.hosts.ready, f: fmt.int },
    { label: "Hosts waiting", metric: "courtly_frontier_hosts", labels: { state: "waiting" }, get: (s) => s.frontier.hosts.waiting, f: fmt.int },
    { label: "Hosts leased", metric: "courtly_frontier_hosts", labels: { state: "leased" }, get: (s) => s.frontier.hosts.leased, f: fmt.int },
    { label: "Hosts backing off", metric: "courtly_hosts_backing_off", get: (s) => s.hosts_backing_off, f: fmt.int, warn: (v) => v > 0 },
    { label: "In flight", metric: "courtly_requests_in_flight", get: (s) => s.in_flight, f: fmt.int },
    { label: "Host delay p50", metric: "courtly_host_delay_seconds", labels: { quantile: "0.5" }, get: (s) => (s.host_delay_s || {})["0.5"], f: fmt.secs },
    { label: "Busiest IP", metric: "courtly_ip_request_rate_max", get: (s) => s.ip_request_rate_max, f: fmt.rate },
    { label: "Latency p50", metric: "courtly_fetch_latency_seconds", quantile: 0.5, get: (s) => lat(s, 0.5), f: fmt.secs },
    { label: "Latency p99", metric: "courtly_fetch_latency_seconds", quantile: 0.99, get: (s) => lat(s, 0.99), f: fmt.secs },
    { label: "DNS cache hits", metric: "courtly_dns_cache_hit_ratio", get: (s) => s.dns_cache_hit_ratio, f: fmt.pct },
    { label: "Bloom fill", metric: "courtly_seen_bloom_fill_ratio", get: (s) => s.seen.bloom_fill_ratio, f: fmt.pct, warn: (v) => v > 0.5 },
    { label: "Trap suspects", metric: "courtly_trap_suspects_open", get: (s) => s.trap_suspects_open, f: fmt.int, warn: (v) => v > 0 },
    { label: "Exact duplicates", metric: "courtly_dup_ratio", labels: { kind: "exact" }, get: (s) => (s.dup_ratio || {}).exact, f: fmt.pct },
    { label: "Near duplicates", metric: "courtly_dup_ratio", labels: { kind: "near" }, get: (s) => (s.dup_ratio || {}).near, f: fmt.pct },
    { label: "Soft-404s", metric: "courtly_soft404_ratio", get: (s) => s.soft404_ratio, f: fmt.pct },
    { label: "Crawl DB on disk", metric: "courtly_frontier_disk_bytes", get: (s) => s.frontier_disk_bytes, f: fmt.bytes },
    { label: "Page budget left", metric: "courtly_budget_left_pages", get: (s) => s.budget_left_pages, f: fmt.int, optional: true },
    { label: "Coverage sample", metric: "courtly_coverage_sample_hit_ratio", get: (s) => (s.coverage_sample || {}).hit_ratio, f: fmt.pct, optional: true },
    { label: "Disk used", metric: "courtly_frontier_disk_used_pct", get: (s) => s.frontier_disk_used_pct, f: (v) => v.toFixed(1) + " %", warn: (v) => v > 90, optional: true },
    { label: "Abuse complaints open", metric: "courtly_abuse_complaints_open", get: (s) => s.abuse_complaints_open, f: fmt.int, warn: (v) => v > 0, optional: true },
    { label: "Parser restarts", metric: "courtly_parser_restarts_total", get: (s) => s.parser_restarts, f: fmt.int, warn: (v) => v > 0, optional: true },
    // rendering ([render]): hidden while it is off or has nothing to show
    { label: "Pages rendered", metric: "courtly_renders_total", labels: { outcome: "rendered" }, get: (s) => s.render.outcomes.rendered, f: fmt.int, optional: true },
    { label: "Render budget used", metric: "courtly_render_budget_used_ratio", get: (s) => s.render.budget_used, f: fmt.pct, optional: true },
    { label: "Render p50", metric: "courtly_render_seconds", quantile: 0.5, get: (s) => renderTime(s, 0.5), f: fmt.secs, optional: true },
    { label: "Render p99", metric: "courtly_render_seconds", quantile: 0.99, get: (s) => renderTime(s, 0.99), f: fmt.secs, optional: true },
    { label: "Subrequests blocked", metric: "courtly_render_subrequests_blocked_total", sum: true, get: (s) => sumOrNull(s.render.blocked), f: fmt.int, optional: true },
    { label: "Browser restarts", metric: "courtly_render_browser_restarts_total", sum: true, get: (s) => sumOrNull(s.render.restarts), f: fmt.int, optional: true },
  ];

  const $ = (sel) => document.querySelector(sel);
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("data-")) e.setAttribute(k, v);
      else if (k === "title") e.title = v;
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
    return e;
  }

  // ---- tiles ----------------------------------------------------------------------
  function buildTiles() {
    const box = $("#tiles");
    TILES.forEach((t, i) => {
      const v = el("span", { class: "v", id: "tile-v-" + i }, "–");
      const attrs = { class: "tile", id: "tile-" + i };
      if (t.metric) {
        attrs["data-metric"] = t.metric;
        if (t.labels) attrs["data-labels"] = JSON.stringify(t.labels);
        if (t.sum) attrs["data-sum"] = "1";
        if (t.quantile !== undefined) attrs["data-quantile"] = String(t.quantile);
      }
      box.append(el("div", attrs, el("span", { class: "k" }, t.label), v));
    });
  }

  function updateTiles(s) {
    TILES.forEach((t, i) => {
      let v = null;
      try { v = t.get(s); } catch (e) { v = null; }
      const tile = document.getElementById("tile-" + i);
      const span = document.getElementById("tile-v-" + i);
      const ok = typeof v === "number" && isFinite(v);
      span.textContent = ok ? t.f(v) : "–";
      tile.dataset.value = ok ? String(v) : "";
      tile.hidden = Boolean(t.optional && !ok);
      tile.classList.toggle("warn", Boolean(ok && t.warn && t.warn(v)));
    });
  }

  // ---- samples and charts ---------------------------------------------------------
  function sample(s) {
    return {
      t: s.now,
      pages: s.fetches.page, robots: s.fetches.robots, bytes: s.bytes_fetched,
      queued: s.frontier.queued_urls, leased_urls: s.frontier.leased_urls,
      ready: s.frontier.hosts.ready, waiting: s.frontier.hosts.waiting, leased: s.frontier.hosts.leased,
      backoff: s.hosts_backing_off,
      fresh: s.freshness_age_s || {},
    };
  }

  function rates(field) {
    const xs = RING.toArray();
    const out = [];
    for (let i = 1; i < xs.length; i++) {
      const dt = xs[i].t - xs[i - 1].t;
      if (dt <= 0) continue;
      out.push([xs[i].t, Math.max(0, xs[i][field] - xs[i - 1][field]) / dt]);
    }
    return out;
  }

  function recentRate(field) {
    const xs = RING.toArray();
    if (xs.length < 2) return null;
    const last = xs[xs.length - 1];
    let first = xs[0];
    for (const x of xs) if (last.t - x.t <= 60) { first = x; break; }
    const dt = last.t - first.t;
    return dt > 0 ? Math.max(0, last[field] - first[field]) / dt : null;
  }

  const series = (field) => RING.toArray().map((x) => [x.t, x[field]]);
  // The time axis covers the samples held, from 30 s up to SPAN_S.
  function span() {
    const xs = RING.toArray();
    const held = xs.length > 1 ? xs[xs.length - 1].t - xs[0].t : 0;
    return Math.min(SPAN_S, Math.max(30, Math.ceil(held / 30) * 30));
  }
  const STATUS_COLOURS = { 2: "#2e9d5b", 3: "#2f6fb3", 4: "#d9822b", 5: "#c63d3d" };

  function drawCharts(s) {
    Charts.line($("#chart-rate"), { span_s: span(), yFormat: fmt.compact, series: [
      { name: "pages", color: "#2f6fb3", points: rates("pages") },
      { name: "robots.txt", color: "#9b59b6", points: rates("robots") }] });
    Charts.line($("#chart-bytes"), { span_s: span(), yFormat: (v) => fmt.bytes(v), series: [
      { name: "bytes/s", color: "#2e9d5b", points: rates("bytes") }] });
    const statuses = Object.entries(s.http_responses || {}).sort((a, b) => Number(a[0]) - Number(b[0]));
    Charts.bars($("#chart-status"), { yFormat: fmt.compact, emptyText: "no responses yet",
      bars: statuses.map(([k, v]) => ({ label: k, value: v, color: STATUS_COLOURS[String(k)[0]] || "#777" })) });
    Charts.line($("#chart-queue"), { span_s: span(), yFormat: fmt.compact, series: [
      { name: "queued", color: "#2f6fb3", points: series("queued") },
      { name: "leased", color: "#d9822b", points: series("leased_urls") }] });
    Charts.line($("#chart-hosts"), { span_s: span(), yFormat: fmt.compact, series: [
      { name: "ready", color: "#2e9d5b", points: series("ready") },
      { name: "waiting", color: "#2f6fb3", points: series("waiting") },
      { name: "leased", color: "#d9822b", points: series("leased") },
      { name: "backing off", color: "#c63d3d", points: series("backoff") }] });
    const h = s.fetch_latency_s || { le: [], counts: [] };
    const buckets = (h.counts || []).map((c, i) => ({
      label: i < h.le.length ? "≤" + fmt.secs(h.le[i]).replace(" ", "") : ">" + fmt.secs(h.le[h.le.length - 1]).replace(" ", ""),
      value: c - (i ? h.counts[i - 1] : 0), color: "#5b8def" }));
    let lo = 0, hi = buckets.length;
    while (lo < hi && buckets[lo].value === 0) lo++;
    while (hi > lo && buckets[hi - 1].value === 0) hi--;
    Charts.bars($("#chart-latency"), { yFormat: fmt.compact, emptyText: "no requests yet", bars: buckets.slice(lo, hi) });
    const reasons = Object.entries(s.decisions || {}).sort((a, b) => b[1] - a[1]).slice(0, 12);
    Charts.bars($("#chart-reasons"), { yFormat: fmt.compact, emptyText: "every URL so far was fetched",
      bars: reasons.map(([k, v]) => ({ label: k, value: v, color: "#8a6d3b" })) });
    const tiers = Object.keys(s.freshness_age_s || {}).sort();
    $("#fig-freshness").hidden = tiers.length === 0;
    if (tiers.length) {
      const colours = ["#2f6fb3", "#2e9d5b", "#d9822b", "#c63d3d", "#9b59b6"];
      Charts.line($("#chart-freshness"), { span_s: span(), yFormat: fmt.secs, series: tiers.map((t, i) => ({
        name: "tier " + t, color: colours[i % colours.length],
        points: RING.toArray().filter((x) => x.fresh[t] && x.fresh[t]["0.5"] != null).map((x) => [x.t, x.fresh[t]["0.5"]]) })) });
    }
  }

  // ---- polling ----------------------------------------------------------------------
  let snapshots = 0;
  let latest = null;

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) throw new Error((body && body.error) || "HTTP " + r.status);
    return body;
  }

  window.CourtlyPage = { el, getJSON };   // for views.js

  function setConn(ok, text) {
    const c = $("#conn");
    c.textContent = text;
    c.className = "pill " + (ok ? "ok" : "bad");
  }

  async function pollSnapshot() {
    try {
      const s = await getJSON("api/snapshot");
      latest = s;
      RING.push(sample(s));
      updateTiles(s);
      drawCharts(s);
      snapshots += 1;
      document.body.dataset.snapshots = String(snapshots);
      setConn(true, (document.body.dataset.mode === "folder" ? "crawl folder · " : "live · ") + clock(s.now));
      $("#uptime").textContent = document.body.dataset.mode === "folder"
        ? (s.last_request_at ? "last request " + when(s.last_request_at) : "no request yet")
        : s.started_at ? "running " + fmt.secs(Math.max(0, s.now - s.started_at)) : "not started";
    } catch (e) {
      setConn(false, "disconnected");
    }
    setTimeout(pollSnapshot, SNAPSHOT_MS);
  }

  // ---- hosts --------------------------------------------------------------------------
  const hostState = { offset: 0, limit: 50, sort: "queued", desc: true, q: "", total: 0, seq: 0 };
  const TEXT_COLUMNS = new Set(["key", "ip", "robots", "backoff", "trap"]);

  function hostCells(r, now) {
    const next = r.next_fetch_at && r.next_fetch_at > now ? "in " + fmt.secs(r.next_fetch_at - now) : "now";
    const backoff = r.backoff ? r.backoff + (r.backoff_until ? " until " + clock(r.backoff_until) : "") : "";
    const key = el("td", {}, r.key);
    if (r.leased) key.append(" ", el("span", { class: "badge" }, "fetching"));
    return [
      key,
      el("td", { class: "mono" }, r.ip || "–"),
      el("td", { class: "num", title: r.crawl_delay_s != null ? "Crawl-delay " + r.crawl_delay_s + " s" : null }, fmt.secs(r.delay_s || 0)),
      el("td", { class: r.backoff ? "bad" : "" }, backoff),
      el("td", { class: /failed/.test(r.robots || "") ? "bad" : "" }, r.robots || "–"),
      el("td", { class: "num" }, fmt.int(r.queued || 0)),
      el("td", { title: when(r.next_fetch_at) }, next),
      el("td", { class: "num" }, r.budget_left == null ? "–" : fmt.int(r.budget_left)),
      el("td", { class: r.trap ? "bad" : "" }, r.trap || ""),
      el("td", { class: "num" }, fmt.int(r.fetches || 0)),
    ].concat("fetched" in r ? [   // a crawl folder's rows (courtly serve) say more
      el("td", { class: r.state === "trap" || r.state === "backing off" ? "bad" : "" }, r.state),
      el("td", { class: "num" }, fmt.int(r.fetched || 0)),
      el("td", { class: "num" }, fmt.int(r.denied_total || 0)),
      el("td", { class: "num" + (r.errors ? " bad" : "") }, fmt.int(r.errors || 0)),
      el("td", { class: "muted" }, Object.entries(r.denied || {}).map(([k, v]) => k + " " + fmt.int(v)).join(", ")),
    ] : []);
  }

  async function loadHosts() {
    const seq = ++hostState.seq;
    const p = new URLSearchParams({ offset: hostState.offset, limit: hostState.limit, sort: hostState.sort,
      desc: hostState.desc ? "1" : "0", q: hostState.q });
    try {
      const d = await getJSON("api/hosts?" + p.toString());
      if (seq !== hostState.seq) return; // a newer request is on its way
      hostState.total = d.total;
      const body = $("#host-table tbody");
      body.replaceChildren(...d.rows.map((r) => el("tr", { "data-key": r.key }, ...hostCells(r, d.now))));
      const extra = d.rows.length > 0 && "fetched" in d.rows[0];
      document.querySelectorAll("#host-table th.extra").forEach((th) => { th.hidden = !extra; });
      if (!d.rows.length) body.append(el("tr", {}, el("td", { colspan: "10", class: "muted" }, hostState.q ? "no host matches" : "no hosts yet")));
      const first = d.total ? d.offset + 1 : 0;
      $("#host-range").textContent = first + "–" + (d.offset + d.rows.length) + " of " + fmt.int(d.total);
      $("#host-count").textContent = "(" + fmt.int(d.total) + (hostState.q ? " matching" : "") + ")";
      $("#host-prev").disabled = d.offset === 0;
      $("#host-next").disabled = d.offset + d.rows.length >= d.total;
      $("#host-error").hidden = true;
      document.querySelectorAll("#host-table th").forEach((th) => {
        const on = th.dataset.sort === hostState.sort;
        th.setAttribute("aria-sort", on ? (hostState.desc ? "descending" : "ascending") : "none");
      });
      document.body.dataset.hostLoads = String((Number(document.body.dataset.hostLoads) || 0) + 1);
    } catch (e) {
      if (seq !== hostState.seq) return;
      $("#host-error").textContent = e.message;
      $("#host-error").hidden = false;
    }
  }

  function wireHosts() {
    document.querySelectorAll("#host-table th[data-sort]").forEach((th) => {
      th.tabIndex = 0;
      const go = () => {
        const col = th.dataset.sort;
        if (hostState.sort === col) hostState.desc = !hostState.desc;
        else { hostState.sort = col; hostState.desc = !TEXT_COLUMNS.has(col); }
        hostState.offset = 0;
        loadHosts();
      };
      th.addEventListener("click", go);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
    });
    let timer = null;
    $("#host-q").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { hostState.q = e.target.value.trim(); hostState.offset = 0; loadHosts(); }, 250);
    });
    $("#host-limit").addEventListener("change", (e) => { hostState.limit = Number(e.target.value); hostState.offset = 0; loadHosts(); });
    $("#host-prev").addEventListener("click", () => { hostState.offset = Math.max(0, hostState.offset - hostState.limit); loadHosts(); });
    $("#host-next").addEventListener("click", () => { hostState.offset += hostState.limit; loadHosts(); });
  }

  // ---- review queue and decisions ----------------------------------------------------
  async function loadReview() {
    try {
      const d = await getJSON("api/review");
      $("#review-table tbody").replaceChildren(...d.rows.map((r) =>
        el("tr", {}, el("td", {}, r.key), el("td", {}, r.rule), el("td", { class: "mono wrap" }, r.scope || "whole host"),
          el("td", { class: "wrap" }, r.evidence), el("td", { title: when(r.since) }, clock(r.since)))));
      $("#review-empty").hidden = d.rows.length > 0;
      $("#review-table").hidden = d.rows.length === 0;
      $("#review-count").textContent = d.rows.length ? "(" + d.rows.length + ")" : "";
    } catch (e) { /* the connection pill already says so */ }
  }

  async function loadDecisions() {
    try {
      const d = await getJSON("api/decisions?limit=50");
      $("#decision-table tbody").replaceChildren(...d.rows.map((r) => {
        const link = el("a", { href: "#explain", class: "url" }, r.url);
        link.addEventListener("click", () => explain(r.url));
        return el("tr", {}, el("td", { title: when(r.at) }, clock(r.at)), el("td", {}, el("span", { class: "badge reason" }, r.reason)),
          el("td", { class: "wrap" }, link), el("td", { class: "wrap muted" }, r.detail));
      }));
      $("#decision-empty").hidden = d.rows.length > 0;
    } catch (e) { /* idem */ }
  }

  // ---- URL history -----------------------------------------------------------------------
  function kv(rows) {
    return el("dl", { class: "kv" }, ...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function urlLink(u) {
    const a = el("a", { href: "#explain", class: "url" }, u);
    a.addEventListener("click", () => explain(u));
    return a;
  }

  function renderExplain(d) {
    const out = $("#explain-out");
    const parts = [];
    const rec = d.record;
    if (!d.found || !rec) {
      parts.push(el("p", { class: "notice" }, "Never seen by this crawl: not a seed and not linked from any fetched page."));
      if (d.note) parts.push(el("p", { class: "muted" }, d.note));
    } else {
      const state = rec.state + (rec.reason ? " (" + rec.reason + (rec.detail ? ": " + rec.detail : "") + ")" : "");
      const rows = [["URL", d.url], ["state", state], ["host key", rec.key || "–"],
        ["depth / band", rec.depth + " / " + rec.band], ["attempts", String(rec.attempts)],
        ["discovered", when(rec.discovered_at) + (rec.via ? "" : " (seed)")]];
      if (d.normalized && d.normalized !== d.url) rows.splice(1, 0, ["normalized", d.normalized]);
      if (d.note) rows.push(["note", d.note]);
      parts.push(kv(rows));
      if ((d.via_chain || []).length) {
        parts.push(el("h3", {}, "Found via"), el("ol", { class: "chain" }, ...d.via_chain.map((u) => el("li", {}, urlLink(u)))));
      }
      parts.push(el("h3", {}, "Requests"));
      if ((d.fetches || []).length) {
        parts.push(el("table", { class: "grid", id: "explain-fetches" },
          el("thead", {}, el("tr", {}, ...["When", "Kind", "Status", "Bytes", "Time", "IP", "WARC", "Replay"].map((h) => el("th", {}, h)))),
          el("tbody", {}, ...d.fetches.map((f) => el("tr", {},
            el("td", {}, when(f.at)), el("td", {}, f.kind), el("td", { class: f.status >= 400 || !f.status ? "bad" : "" }, f.status ? String(f.status) : "error " + f.error),
            el("td", { class: "num" }, fmt.int(f.bytes || 0)), el("td", { class: "num" }, fmt.secs(f.elapsed_s || 0)),
            el("td", { class: "mono" }, f.ip || "–"), el("td", { class: "mono" }, f.warc || "–"),
            el("td", {}, f.replay ? el("a", { href: f.replay, target: "_blank", rel: "noopener", class: "replay" }, "replay") : "–"))))));
      } else {
        parts.push(el("p", { class: "muted" }, rec.state === "queued" ? "Queued, not fetched yet." : "No request was made for this URL."));
      }
      if ((d.links_sample || []).length) {
        parts.push(el("h3", {}, "First found here (sample)"), el("ul", { class: "chain" }, ...d.links_sample.slice(0, 10).map((u) => el("li", {}, urlLink(u)))));
      }
    }
    if ((d.recent_decisions || []).length) {
      parts.push(el("h3", {}, "Recent decisions (not yet in the store)"),
        el("ul", {}, ...d.recent_decisions.map((r) => el("li", {}, clock(r.at) + " " + r.reason + (r.detail ? ": " + r.detail : "")))));
    }
    out.replaceChildren(...parts);
    out.dataset.found = d.found ? "1" : "0";
  }

  async function explain(url) {
    $("#explain-url").value = url;
    const out = $("#explain-out");
    out.replaceChildren(el("p", { class: "muted" }, "looking up…"));
    try {
      renderExplain(await getJSON("api/explain?url=" + encodeURIComponent(url)));
    } catch (e) {
      out.replaceChildren(el("p", { class: "error" }, e.message));
      out.dataset.found = "error";
    }
  }

  function wireExplain() {
    $("#explain-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const url = $("#explain-url").value.trim();
      if (url) explain(url);
    });
  }

  // ---- start ----------------------------------------------------------------------------
  function every(ms, fn) {
    const loop = async () => { if (!document.hidden) await fn(); setTimeout(loop, ms); };
    loop();
  }

  buildTiles();
  wireHosts();
  wireExplain();
  pollSnapshot();
  every(TABLE_MS, loadHosts);
  every(TABLE_MS, loadDecisions);
  every(TABLE_MS * 2, loadReview);
  window.addEventListener("resize", () => { if (latest) drawCharts(latest); });
})();
