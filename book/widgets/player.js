// The ring player: draws a simulator event trace (sim::trace_events, Chrome trace-event JSON)
// as lanes over simulated time, with the state at the cursor: each slot, each mbarrier's
// phase, pending arrivals and tx-bytes, tensor-memory columns. Play, pause, step, scrub;
// keyboard: Space plays or pauses, Left/Right step, Home/End jump.
(function () {
  const NS = "http://www.w3.org/2000/svg";
  // Okabe-Ito, a colour-blind-safe palette.
  // The greys are sim-widget.css's, set per theme so they show on light and dark pages.
  const FILL = { loading: "#56B4E9", full: "#009E73", reading: "#E69F00", empty: "var(--wb-empty)",
    wait: "var(--wb-wait)", blocked: "#D55E00", issue: "#0072B2", arrive: "#CC79A7" };
  function el(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  class Player {
    constructor(root) {
      this.root = root;
      root.classList.add("wb-player");
      root.innerHTML = "";
      const bar = document.createElement("div");
      bar.className = "wb-controls";
      this.playBtn = this.button(bar, "Play", () => this.toggle());
      this.button(bar, "Step back", () => this.step(-1));
      this.button(bar, "Step", () => this.step(1));
      this.scrub = document.createElement("input");
      Object.assign(this.scrub, { type: "range", min: 0, max: 1, value: 0 });
      this.scrub.setAttribute("aria-label", "simulated time");
      this.scrub.className = "wb-scrub";
      this.scrub.addEventListener("input", () => this.seek(+this.scrub.value));
      bar.appendChild(this.scrub);
      this.clock = document.createElement("span");
      this.clock.className = "wb-clock";
      bar.appendChild(this.clock);
      root.appendChild(bar);
      this.svgBox = document.createElement("div");
      this.svgBox.className = "wb-lanes";
      root.appendChild(this.svgBox);
      this.state = document.createElement("div");
      this.state.className = "wb-state";
      this.state.setAttribute("aria-live", "polite");
      root.appendChild(this.state);
      root.tabIndex = 0;
      root.addEventListener("keydown", (e) => {
        if (e.key === " ") { this.toggle(); e.preventDefault(); }
        else if (e.key === "ArrowRight") { this.step(1); e.preventDefault(); }
        else if (e.key === "ArrowLeft") { this.step(-1); e.preventDefault(); }
        else if (e.key === "Home") { this.seek(0); e.preventDefault(); }
        else if (e.key === "End") { this.seek(this.end); e.preventDefault(); }
      });
      this.reduced = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
      this.t = 0; this.end = 1; this.playing = false;
    }
    button(bar, label, f) {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = label; b.addEventListener("click", f);
      bar.appendChild(b);
      return b;
    }
    load(trace) {
      if (!trace || !Array.isArray(trace.traceEvents)) throw new Error("not a trace-event JSON file (no traceEvents)");
      const evs = trace.traceEvents;
      this.meta = trace.otherData || {};
      this.lanes = [];
      const idx = new Map();
      for (const e of evs) if (e.ph === "M" && e.name === "thread_name") {
        idx.set(e.pid + ":" + e.tid, this.lanes.length);
        this.lanes.push({ key: e.pid + ":" + e.tid, name: "CTA " + (e.pid - 1) + " " + e.args.name, slot: e.tid >= 1000 });
      }
      this.spans = evs.filter((e) => e.ph === "X" && idx.has(e.pid + ":" + e.tid)).map((e) => ({ ...e, lane: idx.get(e.pid + ":" + e.tid) }));
      this.ticks = evs.filter((e) => e.ph === "i" && e.cat !== "stop" && idx.has(e.pid + ":" + e.tid)).map((e) => ({ ...e, lane: idx.get(e.pid + ":" + e.tid) }));
      this.counters = evs.filter((e) => e.ph === "C");
      this.stop = evs.find((e) => e.ph === "i" && e.cat === "stop") || null;
      let end = this.meta.end || 1;
      for (const e of evs) if (e.ts !== undefined) end = Math.max(end, e.ts + (e.dur || 0));
      this.end = Math.max(end, 1);
      const times = new Set([0, this.end]);
      for (const e of evs) if (e.ph === "i" || e.ph === "C" || e.ph === "X") { times.add(e.ts); if (e.dur) times.add(e.ts + e.dur); }
      this.times = [...times].sort((a, b) => a - b);
      this.scrub.max = this.end;
      this.draw();
      this.seek(this.stop ? this.stop.ts : this.end);
    }
    draw() {
      const row = 18, left = 250, width = 640, top = 4;
      const h = top + row * this.lanes.length + 6;
      const svg = el("svg", { viewBox: `0 0 ${left + width + 8} ${h}`, width: "100%", role: "img",
        "aria-label": "ring timeline: one row per warp and per slot" });
      const x = (t) => left + (width * t) / this.end;
      this.lanes.forEach((l, i) => {
        const t = el("text", { x: 2, y: top + row * i + 13, class: "wb-lane-name" }, svg);
        t.textContent = l.name;
      });
      for (const s of this.spans) {
        const y = top + row * s.lane + 2;
        const kind = s.cat === "slot" ? s.args.state : (s.args && s.args.blocked ? "blocked" : "wait");
        const r = el("rect", { x: x(s.ts), y, width: Math.max(0.7, x(s.ts + s.dur) - x(s.ts)), height: row - 4, style: "fill:" + (FILL[kind] || FILL.wait) }, svg);
        el("title", {}, r).textContent = s.name;
      }
      for (const s of this.ticks) {
        const y = top + row * s.lane;
        const l = el("line", { x1: x(s.ts), x2: x(s.ts), y1: y + 2, y2: y + row - 2, style: "stroke:" + (FILL[s.cat] || FILL.issue), "stroke-width": 1.2 }, svg);
        el("title", {}, l).textContent = s.name;
      }
      if (this.stop) {
        el("line", { x1: x(this.stop.ts), x2: x(this.stop.ts), y1: 0, y2: h, stroke: "#D55E00", "stroke-width": 2.5, "stroke-dasharray": "4 2", class: "wb-stop-line" }, svg);
      }
      this.cursor = el("line", { x1: left, x2: left, y1: 0, y2: h, class: "wb-cursor", "stroke-width": 1.5 }, svg);
      this.x = x;
      this.svgBox.innerHTML = "";
      this.svgBox.appendChild(svg);
    }
    seek(t) {
      this.t = Math.max(0, Math.min(this.end, t));
      this.scrub.value = this.t;
      const cx = this.x ? this.x(this.t) : 0;
      if (this.cursor) { this.cursor.setAttribute("x1", cx); this.cursor.setAttribute("x2", cx); }
      this.clock.textContent = `step ${Math.round(this.t)} of ${this.end}`;
      this.root.dataset.t = String(Math.round(this.t));
      this.showState();
    }
    step(d) {
      const ts = this.times;
      if (d > 0) { const n = ts.find((v) => v > this.t); this.seek(n === undefined ? this.end : n); }
      else { let p = 0; for (const v of ts) if (v < this.t) p = v; this.seek(p); }
    }
    toggle() {
      this.playing = !this.playing;
      this.playBtn.textContent = this.playing ? "Pause" : "Play";
      if (!this.playing) return;
      if (this.t >= this.end) this.seek(0);
      const tick = () => {
        if (!this.playing) return;
        if (this.reduced) this.step(1); else this.seek(this.t + this.end / 300);
        if (this.t >= this.end) { this.playing = false; this.playBtn.textContent = "Play"; return; }
        setTimeout(tick, this.reduced ? 400 : 30);
      };
      tick();
    }
    showState() {
      const t = this.t;
      const bars = new Map(), tmem = new Map();
      for (const c of this.counters) if (c.ts <= t) {
        if (c.cat === "mbarrier") bars.set(`CTA ${c.pid - 1} ${c.name}`, c.args);
        else if (c.cat === "tmem") tmem.set(`CTA ${c.pid - 1}`, c.args.allocated);
      }
      const slots = [];
      for (const s of this.spans) if (s.cat === "slot" && s.ts <= t && t < s.ts + Math.max(1, s.dur)) slots.push(`${this.lanes[s.lane].name}: ${s.args.state}`);
      let html = "<div><b>slots</b><ul>" + slots.map((s) => `<li>${esc(s)}</li>`).join("") + "</ul></div>";
      html += "<div><b>mbarriers</b> (phase, pending arrivals, tx-bytes)<ul>";
      for (const [k, a] of bars) html += `<li>${esc(k)}: phase ${a.phase}, pending ${a.pending}, tx ${a.tx}</li>`;
      html += "</ul></div><div><b>tensor memory</b><ul>";
      for (const [k, n] of tmem) html += `<li>${esc(k)}: ${n} columns allocated</li>`;
      html += "</ul></div>";
      if (this.stop && t >= this.stop.ts) html += `<div class="wb-stop"><b>${esc(this.stop.name)}</b><br>${esc(this.stop.args.message || "")}</div>`;
      this.state.innerHTML = html;
    }
  }
  function esc(s) { return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c])); }
  window.WbPlayer = Player;
  window.wbEsc = esc;
})();
