/* courtly status page: small canvas charts (no library, no network).
 *
 * Charts.line(canvas, {series: [{name, color, points: [[t, v], ...]}], span_s, yFormat})
 *   a time series chart; t in seconds (server clock), the newest point at the right edge.
 * Charts.bars(canvas, {bars: [{label, value, color}], yFormat})
 *   a bar chart with one labelled bar per entry.
 * Charts.Ring(capacity): a ring buffer of samples (push, toArray, length).
 *
 * Every draw sets canvas.dataset.points to the number of values drawn, so a
 * test can tell an empty chart from a drawn one.
 */
"use strict";

(function (global) {
  const FONT = "11px system-ui, -apple-system, 'Segoe UI', sans-serif";

  function css(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  class Ring {
    constructor(capacity) {
      this.capacity = capacity;
      this.items = new Array(capacity);
      this.start = 0;
      this.length = 0;
    }
    push(item) {
      const i = (this.start + this.length) % this.capacity;
      this.items[i] = item;
      if (this.length < this.capacity) this.length += 1;
      else this.start = (this.start + 1) % this.capacity;
    }
    toArray() {
      const out = [];
      for (let i = 0; i < this.length; i++) out.push(this.items[(this.start + i) % this.capacity]);
      return out;
    }
    last() {
      return this.length ? this.items[(this.start + this.length - 1) % this.capacity] : undefined;
    }
  }

  /* Size the backing store to the element's CSS size and the device pixel ratio. */
  function prepare(canvas) {
    const dpr = global.devicePixelRatio || 1;
    const w = Math.max(50, canvas.clientWidth || 300);
    const h = Math.max(50, canvas.clientHeight || 160);
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = FONT;
    return { ctx, w, h };
  }

  /* A "nice" upper bound for an axis: 1, 2 or 5 times a power of ten. */
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 4, 8, 10]) if (m * p >= v) return m * p;  // quarter ticks stay round
    return 10 * p;
  }

  /* Width of the widest y-axis label, plus a gap: the plot starts there. */
  function leftMargin(ctx, yMax, yFormat) {
    let w = 0;
    for (let i = 0; i <= 4; i++) w = Math.max(w, ctx.measureText(yFormat((yMax * i) / 4)).width);
    return Math.ceil(w) + 10;
  }

  function grid(ctx, box, yMax, yFormat) {
    ctx.strokeStyle = css("--grid", "#e3e7ee");
    ctx.fillStyle = css("--muted", "#6b7687");
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = 0; i <= 4; i++) {
      const y = Math.round(box.y + box.h - (box.h * i) / 4) + 0.5;
      ctx.beginPath();
      ctx.moveTo(box.x, y);
      ctx.lineTo(box.x + box.w, y);
      ctx.stroke();
      ctx.fillText(yFormat((yMax * i) / 4), box.x - 4, y);
    }
  }

  function empty(ctx, w, h, text) {
    ctx.fillStyle = css("--muted", "#6b7687");
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(text, w / 2, h / 2);
  }

  function legend(ctx, series, x, y) {
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    let cx = x;
    for (const s of series) {
      ctx.fillStyle = s.color;
      ctx.fillRect(cx, y - 4, 10, 8);
      ctx.fillStyle = css("--fg", "#1c2430");
      ctx.fillText(s.name, cx + 14, y);
      cx += 22 + ctx.measureText(s.name).width;
    }
  }

  function line(canvas, opts) {
    const { ctx, w, h } = prepare(canvas);
    const series = opts.series || [];
    const yFormat = opts.yFormat || ((v) => String(Math.round(v)));
    const all = series.flatMap((s) => s.points);
    canvas.dataset.points = String(all.length);
    if (all.length === 0) {
      legend(ctx, series, 52, 8);
      empty(ctx, w, h, opts.emptyText || "waiting for data…");
      return;
    }
    const tMax = Math.max(...all.map((p) => p[0]));
    const span = Math.max(opts.span_s || 60, 1);
    const tMin = tMax - span;
    const yMax = niceMax(Math.max(...all.map((p) => p[1])) * 1.05);
    const left = leftMargin(ctx, yMax, yFormat);
    const box = { x: left, y: 24, w: w - left - 16, h: h - 46 };
    legend(ctx, series, box.x, 8);
    grid(ctx, box, yMax, yFormat);
    ctx.fillStyle = css("--muted", "#6b7687");
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let i = 0; i <= 4; i++) {
      const ago = span - (span * i) / 4;
      ctx.fillText(i === 4 ? "now" : "-" + Math.round(ago) + "s", box.x + (box.w * i) / 4, box.y + box.h + 5);
    }
    const X = (t) => box.x + ((t - tMin) / span) * box.w;
    const Y = (v) => box.y + box.h - (Math.max(0, v) / yMax) * box.h;
    for (const s of series) {
      const pts = s.points.filter((p) => p[0] >= tMin);
      if (!pts.length) continue;
      ctx.strokeStyle = s.color;
      ctx.lineWidth = 2;
      ctx.lineJoin = "round";
      ctx.beginPath();
      pts.forEach((p, i) => (i ? ctx.lineTo(X(p[0]), Y(p[1])) : ctx.moveTo(X(p[0]), Y(p[1]))));
      ctx.stroke();
      if (pts.length === 1) {
        ctx.fillStyle = s.color;
        ctx.beginPath();
        ctx.arc(X(pts[0][0]), Y(pts[0][1]), 3, 0, 2 * Math.PI);
        ctx.fill();
      }
    }
  }

  function bars(canvas, opts) {
    const { ctx, w, h } = prepare(canvas);
    const items = opts.bars || [];
    const yFormat = opts.yFormat || ((v) => String(Math.round(v)));
    canvas.dataset.points = String(items.length);
    if (items.length === 0) {
      empty(ctx, w, h, opts.emptyText || "nothing yet");
      return;
    }
    const yMax = niceMax(Math.max(...items.map((b) => b.value)) * 1.05);
    const left = leftMargin(ctx, yMax, yFormat);
    const box = { x: left, y: 10, w: w - left - 10, h: h - 34 };
    grid(ctx, box, yMax, yFormat);
    const slot = box.w / items.length;
    const bw = Math.max(2, Math.min(48, slot * 0.7));
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    items.forEach((b, i) => {
      const x = box.x + slot * i + (slot - bw) / 2;
      const bh = (Math.max(0, b.value) / yMax) * box.h;
      ctx.fillStyle = b.color || css("--accent", "#2f6fb3");
      ctx.fillRect(x, box.y + box.h - bh, bw, Math.max(bh, b.value > 0 ? 1 : 0));
      ctx.fillStyle = css("--fg", "#1c2430");
      const every = Math.ceil(items.length / Math.max(1, Math.floor(box.w / 38)));
      if (i % every === 0) ctx.fillText(b.label, x + bw / 2, box.y + box.h + 5);
    });
  }

  global.Charts = { Ring, line, bars, niceMax };
})(window);
