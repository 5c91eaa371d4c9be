// The simulator widgets of a step's chapter (`{{#sim-widget N}}`): run the step's kernel in
// the page (a Web Worker running steps/simweb's WebAssembly), break it with each seeded bug,
// watch the ring (player.js), load a trace file (`runner step N --sim --trace`), and with
// data-layouts the swizzle, descriptors and lane quarters the simulator's units compute.
(function () {
  const base = (function () {
    const s = document.currentScript && document.currentScript.src;
    return s ? s.slice(0, s.lastIndexOf("/") + 1) : "widgets/";
  })();
  let worker = null, nextId = 1;
  const waiting = new Map();
  function ask(msg) {
    if (!worker) {
      worker = new Worker(base + "sim-worker.js");
      worker.onmessage = (e) => { const f = waiting.get(e.data.id); waiting.delete(e.data.id); if (f) f(e.data.out); };
    }
    const id = nextId++;
    return new Promise((res) => { waiting.set(id, res); worker.postMessage({ id, base, ...msg }); });
  }
  const esc = (s) => window.wbEsc(s);
  function h(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls; if (text) e.textContent = text; return e; }

  async function setup(root) {
    const n = +root.dataset.step;
    root.innerHTML = "";
    root.appendChild(h("h4", null, `Step ${n} in the simulator`));
    const bar = h("div", "wb-controls");
    bar.innerHTML = `<label>seed <input type="number" min="1" value="1" class="wb-seed"></label>
      <label>policy <select class="wb-policy"><option>random</option><option>pct</option><option>async-late</option><option>async-early</option></select></label>`;
    const run = h("button", "wb-run", "Run the kernel");
    run.type = "button";
    bar.appendChild(run);
    const file = h("label", "wb-file");
    file.innerHTML = `or load a trace (runner step ${n} --sim --trace): <input type="file" accept=".json,application/json" class="wb-trace-file">`;
    bar.appendChild(file);
    root.appendChild(bar);
    // Which source the Run button runs: ours, or yours (runner book --serve --kernel).
    const source = h("div", "wb-source");
    root.appendChild(source);
    const verdict = h("div", "wb-verdict");
    verdict.setAttribute("role", "status");
    root.appendChild(verdict);
    const bugs = h("div", "wb-bugs");
    root.appendChild(bugs);
    const playerBox = h("div");
    root.appendChild(playerBox);
    const player = new window.WbPlayer(playerBox);
    const listing = h("pre", "wb-listing");
    listing.hidden = true;
    root.appendChild(listing);

    function show(out, label) {
      const ok = out.verdict === "PASS";
      verdict.className = "wb-verdict " + (ok ? "wb-pass" : "wb-fail");
      const text = out.rule ? `${label}: rule ${out.rule}` : `${label}: ${out.verdict}`;
      if (out.sources && out.sources[0]) showSource(out.kernelOf, out.sources[0][0], out.bug);
      verdict.innerHTML = `<b>${esc(text)}</b> <span class="wb-time">(${out.wall_ms} ms in the page, seed ${out.seed}, policy ${esc(out.policy || "")})</span><br><span class="wb-msg">${esc(out.message || "")}</span>`;
      root.dataset.verdict = out.verdict;
      if (out.rule) root.dataset.rule = out.rule; else delete root.dataset.rule;
      if (out.trace) player.load(out.trace);
      showListing(out);
    }
    function showListing(out) {
      const src = out.sources && out.sources[0];
      if (!src || !out.source_line) { listing.hidden = true; return; }
      const lines = src[1].split("\n");
      const at = out.source_line;
      const from = Math.max(1, at - 6), to = Math.min(lines.length, at + 6);
      let html = `<span class="wb-listing-path">${esc(src[0])}</span>\n`;
      for (let i = from; i <= to; i++) {
        const l = `${String(i).padStart(4)}  ${esc(lines[i - 1])}`;
        html += i === at ? `<mark class="wb-hl" data-line="${i}">${l}</mark>\n` : l + "\n";
      }
      listing.innerHTML = html;
      listing.hidden = false;
    }
    let reader = null, ourPath = "";
    function showSource(whose, path, bug) {
      root.dataset.source = whose;
      const what = whose === "yours" ? "your kernel" : bug ? `our kernel with the seeded bug ${bug}` : "our kernel";
      source.innerHTML = `runs <b class="wb-whose">${esc(what)}</b>: <code>${esc(path || "")}</code>`;
    }
    async function go(name, label) {
      run.disabled = true;
      verdict.className = "wb-verdict";
      verdict.textContent = `running ${label} in the simulator...`;
      delete root.dataset.verdict;
      const req = { seed: +root.querySelector(".wb-seed").value || 1, policy: root.querySelector(".wb-policy").value,
        label: { step: n, kernel: name } };
      const t0 = performance.now();
      const url = name === "yours" ? `${base}reader/kernel.json` : `${base}kernels/step${n}-${name}.json`;
      const out = await ask({ fn: "wb_run", url, req });
      out.wall_ms = Math.round(performance.now() - t0);
      out.kernelOf = name === "yours" ? "yours" : "ours";
      if (name !== "yours" && name !== "stock") out.bug = name;
      show(out, label);
      run.disabled = false;
    }
    run.addEventListener("click", () => {
      const yours = reader && root.querySelector(".wb-src-yours") && root.querySelector(".wb-src-yours").checked;
      go(yours ? "yours" : "stock", yours ? `your step ${n}` : `step ${n}`);
    });
    root.querySelector(".wb-trace-file").addEventListener("change", async (e) => {
      const f = e.target.files[0];
      if (!f) return;
      try {
        const t = JSON.parse(await f.text());
        player.load(t);
        verdict.className = "wb-verdict";
        verdict.textContent = `loaded ${f.name}: ${(t.otherData && t.otherData.verdict) || "a trace"}`;
        root.dataset.loaded = f.name;
      } catch (err) {
        verdict.className = "wb-verdict wb-fail";
        verdict.textContent = `${f.name} is not a simulator trace: ${err.message}`;
      }
    });
    try {
      const index = await (await fetch(base + "kernels/index.json")).json();
      const stock = index.find((k) => k.step === n && k.name === "stock");
      if (stock) ourPath = stock.path || "";
      const mine = index.filter((k) => k.step === n && k.name !== "stock");
      if (mine.length) {
        bugs.appendChild(h("span", null, "Break it: "));
        for (const k of mine) {
          const b = h("button", "wb-bug", k.name);
          b.type = "button";
          b.title = k.description || "";
          b.dataset.bug = k.name;
          b.addEventListener("click", () => go(k.name, `seeded bug ${k.name}`));
          bugs.appendChild(b);
        }
      }
    } catch (err) {
      bugs.textContent = "no seeded bugs found: " + err.message;
    }
    // What `runner book --serve` brings (the static book's index offers nothing).
    try {
      const offer = await (await fetch(base + "reader/index.json", { cache: "no-store" })).json();
      const k = offer.kernel && offer.kernel.step === n ? offer.kernel : null;
      if (k) {
        reader = k;
        const pick = h("span", "wb-pick");
        pick.innerHTML = `<label><input type="radio" name="wb-src-${n}" class="wb-src-ours"> our kernel</label>
          <label title="${esc(k.path)}"><input type="radio" name="wb-src-${n}" class="wb-src-yours" checked> your kernel (${esc(k.path.split("/").pop())})</label>`;
        bar.insertBefore(pick, run);
        showSource("yours", k.path);
      }
      const t = offer.trace && offer.trace.step === n ? offer.trace : null;
      if (t) {
        const b = h("button", "wb-last-trace", `Load your last trace (${t.name})`);
        b.type = "button";
        b.title = t.path;
        b.addEventListener("click", async () => {
          try {
            const trace = await (await fetch(base + "reader/trace.json", { cache: "no-store" })).json();
            if (trace.error) throw new Error(trace.error);
            player.load(trace);
            verdict.className = "wb-verdict";
            verdict.textContent = `loaded your last trace ${t.name}: ${(trace.otherData && trace.otherData.verdict) || "a trace"}`;
            root.dataset.loaded = t.name;
          } catch (err) {
            verdict.className = "wb-verdict wb-fail";
            verdict.textContent = `your last trace did not load: ${err.message}`;
          }
        });
        bar.appendChild(b);
      }
    } catch (err) {
      // An older build without widgets/reader/: nothing to offer.
    }
    if (!root.dataset.source) showSource("ours", ourPath);
    if (root.dataset.layouts) layouts(root);
    root.dataset.ready = "1";
  }

  async function layouts(root) {
    const box = h("div", "wb-layouts");
    root.appendChild(box);
    const out = await ask({ fn: "wb_layouts", req: { rows: 8, n: 256 } });
    const sw = out.swizzle;
    let html = "<h5>128-byte swizzle (a TMA load by the simulator's tensor-map unit)</h5><table class='wb-swz'><tr><th>row</th>";
    for (let p = 0; p < 8; p++) html += `<th>bytes ${p * 16}-${p * 16 + 15}</th>`;
    html += "</tr>";
    (sw.physical || []).forEach((r, i) => { html += `<tr><th>${i}</th>` + r.map((c) => `<td class="wb-c${c}">chunk ${c}</td>`).join("") + "</tr>"; });
    html += "</table>";
    for (const [title, d] of [["shared-memory descriptor", out.smem_desc], ["instruction descriptor (M=128, N=256, f16)", out.instr_desc]]) {
      html += `<h5>${title}: <code>${d.value}</code></h5><table>` + d.fields.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join("") + "</table>";
    }
    html += "<h5>tensor-memory lane quarters: which warp of a warpgroup may tcgen05.ld which lanes</h5><table><tr><th></th>";
    for (let q = 0; q < 4; q++) html += `<th>lanes ${32 * q}-${32 * q + 31}</th>`;
    html += "</tr>";
    out.tmem_quarters.forEach((r, w) => { html += `<tr><th>warp ${w}</th>` + r.map((c) => `<td title="${esc(c.why || "")}">${c.ok ? "yes" : "no"}</td>`).join("") + "</tr>"; });
    box.innerHTML = html + "</table>";
  }

  function start() { document.querySelectorAll(".wb-sim").forEach((r) => setup(r)); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
