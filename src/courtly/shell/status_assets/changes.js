// courtly monitor page: the watch list, the change list and a side-by-side diff view.
// Everything is drawn with textContent (page text is never HTML here).
"use strict";
(function () {
  const $ = (s) => document.querySelector(s);
  const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
  let shown = null;

  async function get(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (!r.ok) throw new Error(path + ": " + r.status);
    return r.json();
  }

  function row(cells) { const tr = document.createElement("tr"); for (const c of cells) { const td = document.createElement("td"); if (c instanceof Node) td.appendChild(c); else td.textContent = c; tr.appendChild(td); } return tr; }

  function renderWatches(rows) {
    const body = $("#watch-table tbody");
    body.replaceChildren(...rows.map((w) => {
      const state = w.paused ? "paused" : (w.learning ? "learning" : "every " + w.interval_s + " s");
      const feed = el("a", "atom"); feed.href = "watches/" + w.id + "/changes.atom";
      const tr = row([String(w.id), w.url, state, String(w.checks), String(w.changes), w.noise_learned.join(" | "), feed]);
      tr.dataset.watch = String(w.id);
      return tr;
    }));
    $("#watch-count").textContent = "(" + rows.length + ")";
  }

  function renderChanges(rows) {
    const body = $("#change-table tbody");
    body.replaceChildren(...rows.map((c) => {
      const b = el("button", "diff"); b.type = "button"; b.addEventListener("click", () => { location.hash = "change-" + c.seq; });
      const tr = row(["#" + c.seq, c.detected_at, c.url, String(c.diff.added.length), String(c.diff.removed.length),
                      String(c.diff.changed.length), c.delivery + (c.attempts ? " (" + c.attempts + ")" : ""), b]);
      tr.dataset.seq = String(c.seq);
      return tr;
    }));
    $("#change-count").textContent = "(" + rows.length + ")";
  }

  // blocks of `side` missing from `other` (as a multiset) are marked
  function marked(side, other, cls) {
    const left = new Map();
    for (const b of other) left.set(b, (left.get(b) || 0) + 1);
    return side.map((b) => { const n = left.get(b) || 0; if (n) { left.set(b, n - 1); return el("div", b, "blk"); } return el("div", b, "blk " + cls); });
  }

  async function showDiff(seq) {
    const c = await get("api/changes/" + seq);
    $("#diff").hidden = false;
    $("#diff-title").textContent = "#" + c.seq + " " + c.url;
    $("#diff-times").textContent = "detected " + c.detected_at;
    $("#diff-before-at").textContent = c.previous_capture || "";
    $("#diff-after-at").textContent = c.capture;
    $("#diff-before").replaceChildren(...marked(c.before, c.after, "del"));
    $("#diff-after").replaceChildren(...marked(c.after, c.before, "ins"));
    $("#diff-values").replaceChildren(...c.diff.changed.map((v) => el("li", (v.context ? v.context + " " : "") + v.before + " → " + v.after)));
    shown = seq;
    document.body.dataset.diff = String(seq);
  }

  async function refresh() {
    try {
      const [w, c] = await Promise.all([get("api/watches"), get("api/changes?limit=200")]);
      renderWatches(w.rows);
      renderChanges(c.rows);
      $("#conn").textContent = "live"; $("#conn").className = "pill ok";
      document.body.dataset.loads = String(Number(document.body.dataset.loads || 0) + 1);
    } catch (e) {
      $("#conn").textContent = "disconnected"; $("#conn").className = "pill bad";
    }
  }

  function route() {
    const m = /^#change-(\d+)$/.exec(location.hash);
    if (m && Number(m[1]) !== shown) showDiff(Number(m[1])).catch((e) => { $("#diff-title").textContent = String(e); });
  }

  window.addEventListener("hashchange", route);
  refresh().then(route);
  setInterval(refresh, 2000);
})();
