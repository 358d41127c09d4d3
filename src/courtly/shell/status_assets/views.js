/* courtly status page: the views of a crawl folder (courtly serve, and a live crawl).
 *
 * Shown when /api/info lists them: the whole crawl's
 * charts from the fetch log (/api/timeline), the URL list filtered by state,
 * reason and host (/api/urls, paged by the server) with a replay link per
 * capture, and a click on a host key that lists that host's queued URLs.
 *
 * Rules: as app.js (same-origin requests only; values from the crawl are
 * inserted as text, never as HTML); a replay link opens in a new tab.
 */
"use strict";

(function () {
  const $ = (sel) => document.querySelector(sel);
  const PAGE = 50;
  const urlState = { offset: 0, total: 0, seq: 0 };
  const { el, getJSON } = window.CourtlyPage;   // app.js runs first (both are deferred, in order)

  const when = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z" : "–");
  const compact = (v) => (v >= 1e6 ? (v / 1e6).toFixed(1) + "M" : v >= 1e4 ? Math.round(v / 1e3) + "k" : v >= 1000 ? (v / 1e3).toFixed(1) + "k" : String(Math.round(v * 100) / 100));
  const bump = (name) => { document.body.dataset[name] = String((Number(document.body.dataset[name]) || 0) + 1); };

  // ---- the whole crawl, from the fetch log ----------------------------------------
  let timeline = null;
  function drawTimeline() {
    if (!timeline) return;
    const pts = timeline.points || [];
    const span = timeline.start ? Math.max(1, timeline.end - timeline.start + (timeline.bucket_s || 0)) : 60;
    const series = (field) => pts.map((p) => [p.t, p[field]]);
    Charts.line($("#chart-crawl-requests"), { span_s: span, yFormat: compact, emptyText: "no request yet", series: [
      { name: "pages", color: "#2f6fb3", points: series("pages") },
      { name: "robots.txt", color: "#9b59b6", points: series("robots") }] });
    Charts.line($("#chart-crawl-bytes"), { span_s: span, yFormat: compact, emptyText: "no request yet", series: [
      { name: "bytes", color: "#2e9d5b", points: series("bytes") }] });
    Charts.line($("#chart-crawl-errors"), { span_s: span, yFormat: compact, emptyText: "no request yet", series: [
      { name: "errors", color: "#c63d3d", points: series("errors") },
      { name: "4xx", color: "#d9822b", points: series("s4xx") },
      { name: "5xx", color: "#8a6d3b", points: series("s5xx") }] });
    $("#crawl-span").textContent = timeline.start ? "(" + when(timeline.start) + " – " + when(timeline.end) + ", buckets of " +
      Math.round(timeline.bucket_s) + " s)" : "";
  }

  async function loadTimeline() {
    try {
      timeline = await getJSON("api/timeline?buckets=120");
      drawTimeline();
      bump("timelineLoads");
    } catch (e) { /* the connection pill says so */ }
  }

  // ---- URLs -------------------------------------------------------------------------
  function explainLink(u) {
    const a = el("a", { href: "#explain", class: "url" }, u);
    a.addEventListener("click", () => {   // app.js owns the URL history box: fill it and submit
      $("#explain-url").value = u;
      $("#explain-form").requestSubmit();
    });
    return a;
  }

  function urlRow(r) {
    const replay = r.replay ? el("a", { href: r.replay, target: "_blank", rel: "noopener", class: "replay" }, "replay") : "–";
    return el("tr", { "data-url": r.url },
      el("td", { class: "wrap" }, explainLink(r.url)),
      el("td", {}, r.state),
      el("td", {}, r.reason ? el("span", { class: "badge reason" }, r.reason) : ""),
      el("td", { class: "wrap muted" }, r.detail),
      el("td", { class: "num" + (r.status >= 400 ? " bad" : "") }, r.status == null ? "–" : String(r.status)),
      el("td", {}, when(r.captured_at)),
      el("td", {}, replay));
  }

  async function loadUrls() {
    const seq = ++urlState.seq;
    const p = new URLSearchParams({ offset: urlState.offset, limit: PAGE, state: $("#url-state").value,
      reason: $("#url-reason").value, host: $("#url-host").value.trim() });
    try {
      const d = await getJSON("api/urls?" + p.toString());
      if (seq !== urlState.seq) return;
      urlState.total = d.total;
      const body = $("#url-table tbody");
      body.replaceChildren(...d.rows.map(urlRow));
      if (!d.rows.length) body.append(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "no URL matches")));
      $("#url-range").textContent = (d.total ? d.offset + 1 : 0) + "–" + (d.offset + d.rows.length) + " of " + d.total.toLocaleString("en-US");
      $("#url-count").textContent = "(" + d.total.toLocaleString("en-US") + ")";
      $("#url-prev").disabled = d.offset === 0;
      $("#url-next").disabled = d.offset + d.rows.length >= d.total;
      $("#url-error").hidden = true;
      bump("urlLoads");
    } catch (e) {
      if (seq !== urlState.seq) return;
      $("#url-error").textContent = e.message;
      $("#url-error").hidden = false;
    }
  }

  function reasonsFrom(snapshot) {
    const sel = $("#url-reason");
    const have = new Set([...sel.options].map((o) => o.value));
    Object.keys(snapshot.decisions || {}).sort().forEach((r) => { if (!have.has(r)) sel.append(el("option", { value: r }, r)); });
  }

  function wireUrls() {
    const reload = () => { urlState.offset = 0; loadUrls(); };
    $("#url-state").addEventListener("change", reload);
    $("#url-reason").addEventListener("change", () => {
      if ($("#url-reason").value) $("#url-state").value = "skipped";
      reload();
    });
    let timer = null;
    $("#url-host").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(reload, 250); });
    $("#url-form").addEventListener("submit", (e) => { e.preventDefault(); reload(); });
    $("#url-prev").addEventListener("click", () => { urlState.offset = Math.max(0, urlState.offset - PAGE); loadUrls(); });
    $("#url-next").addEventListener("click", () => { urlState.offset += PAGE; loadUrls(); });
    // a click on a host key lists its queued URLs
    $("#host-table tbody").addEventListener("click", (e) => {
      const td = e.target.closest("td");
      const tr = e.target.closest("tr[data-key]");
      if (!td || !tr || td !== tr.firstElementChild) return;
      $("#url-host").value = tr.dataset.key;
      $("#url-state").value = "queued";
      $("#url-reason").value = "";
      reload();
      $("#urls").scrollIntoView();
    });
  }

  // ---- start ------------------------------------------------------------------------
  async function start() {
    let info;
    try { info = await getJSON("api/info"); } catch (e) { return; }
    if (!(info.views || []).includes("urls")) return;
    document.querySelectorAll(".folder-only").forEach((x) => { x.hidden = false; });
    if (info.mode === "folder") {
      document.body.dataset.mode = "folder";
      // charts of what happened since the page was opened: flat for a folder (the whole crawl's are below)
      document.querySelectorAll(".live-only").forEach((x) => { x.hidden = true; });
      $("footer").textContent = "courtly serve · figures are read from the crawl folder " + info.out +
        " (read-only); /metrics has the same numbers";
    }
    try { reasonsFrom(await getJSON("api/snapshot")); } catch (e) { /* reasons stay as they are */ }
    wireUrls();
    loadUrls();
    const loop = async () => { if (!document.hidden) await loadTimeline(); setTimeout(loop, 10000); };
    loop();
    window.addEventListener("resize", drawTimeline);
  }
  start();
})();
