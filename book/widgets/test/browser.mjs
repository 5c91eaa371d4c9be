// The widgets in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven over
// the DevTools protocol with Node's own WebSocket (node --experimental-websocket; no npm
// package). Usage: node --experimental-websocket browser.mjs URL_OF_BOOK OUT_DIR TRACE_FILE YOUR_KERNEL
// The book is served by `runner book --serve --kernel YOUR_KERNEL --step 3` (YOUR_KERNEL: step 3's
// kernel with a seeded bug) after `runner step 3 --sim --trace` wrote TRACE_FILE.
// Asserts: step 0's and step 6's runs finish in bounded time from page load (timings.json);
// step 3's widget runs our kernel and shows PASS; a seeded bug shows its rule and highlights
// its line; the player steps and scrubs; your kernel runs (and is named), an edit that does not
// compile says so; your last trace loads with one click; a dropped trace file loads; every
// mdbook theme keeps the widget's text and marks visible; no console errors.
// Screenshots go to OUT_DIR (running-widget.png: the book's running chapter's). Exit 0 when every
// check passed.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [book, out, traceFile, yourKernel] = process.argv.slice(2);
// The targets are 3 s (step 0) and 6 s (step 6) from page load on 2 cores; CI's 2 cores are
// shared with the build, so the test fails only at 4x the target: a regression, not noise.
const BOUND = { step0: 12000, step6: 24000 };
const chromium = process.env.WORKBOOK_CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "wb-chromium-"));
const proc = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", `--user-data-dir=${profile}`,
  "--remote-debugging-port=0", "--window-size=1200,1600", "about:blank"], { stdio: ["ignore", "ignore", "pipe"] });
const errors = [];
const fail = (m) => { console.error("FAIL: " + m + (errors.length ? "\nconsole errors: " + errors.join(" | ") : "")); cleanup(1); };
function cleanup(code) { try { proc.kill(); } catch {} try { rmSync(profile, { recursive: true, force: true }); } catch {} process.exit(code); }
setTimeout(() => fail("timed out after 180 s"), 180000);
const wsUrl = await new Promise((res, rej) => {
  let buf = "";
  proc.stderr.on("data", (d) => { buf += d; const m = buf.match(/DevTools listening on (ws:\/\/\S+)/); if (m) res(m[1]); });
  proc.on("exit", (c) => rej(new Error("chromium exited " + c + ": " + buf)));
}).catch((e) => fail(e.message));
const browser = new WebSocket(wsUrl);
await new Promise((r) => (browser.onopen = r));
let id = 0; const pending = new Map();
browser.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
  if (msg.method === "Runtime.consoleAPICalled" && msg.params.type === "error") errors.push(msg.params.args.map((a) => a.value || a.description).join(" "));
  if (msg.method === "Runtime.exceptionThrown") errors.push(msg.params.exceptionDetails.exception?.description || msg.params.exceptionDetails.text);
  if (msg.method === "Log.entryAdded" && msg.params.entry.level === "error") errors.push(msg.params.entry.text + " " + (msg.params.entry.url || ""));
};
const send = (method, params = {}, sessionId) => new Promise((res) => { const i = ++id; pending.set(i, res); browser.send(JSON.stringify({ id: i, method, params, sessionId })); });
const { result: { targetId } } = await send("Target.createTarget", { url: "about:blank" });
const { result: { sessionId } } = await send("Target.attachToTarget", { targetId, flatten: true });
const page = (m, p) => send(m, p, sessionId);
await page("Runtime.enable"); await page("Log.enable"); await page("Page.enable"); await page("DOM.enable");
async function evaluate(expr) {
  const r = await page("Runtime.evaluate", { expression: expr, awaitPromise: true, returnByValue: true });
  if (r.result.exceptionDetails) throw new Error(expr + ": " + JSON.stringify(r.result.exceptionDetails));
  return r.result.result.value;
}
async function until(expr, what, ms = 60000) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) { const v = await evaluate(expr); if (v) return v; await new Promise((r) => setTimeout(r, 100)); }
  // What the page showed and logged, so a failure in CI can be read from its log alone.
  let shown = "";
  try { shown = await evaluate("(document.querySelector('.wb-sim') || document.body).innerText.slice(0, 1500)"); } catch (e) { shown = String(e); }
  console.log("page text at the timeout: " + shown);
  console.log("page errors so far: " + JSON.stringify(errors));
  fail("waited " + ms + " ms for " + what);
}
async function shot(name) {
  const r = await page("Page.captureScreenshot", { format: "png", captureBeyondViewport: false });
  writeFileSync(join(out, name), Buffer.from(r.result.data, "base64"));
}
const checks = [];
const ok = (m) => { checks.push(m); console.log("ok: " + m); };

async function shotOf(name, selector, maxHeight) {
  // The element's box in CSS pixels, at device scale 1: a small PNG; mdbook's sticky menu
  // bar hidden, so it does not cover the widget's top.
  const box = await evaluate(`(()=>{const bar=document.querySelector('#mdbook-menu-bar, #menu-bar'); if (bar) bar.style.visibility='hidden'; const e=document.querySelector(${JSON.stringify(selector)}); e.scrollIntoView(); const r=e.getBoundingClientRect(); return [r.x+window.scrollX, r.y+window.scrollY, r.width, r.height]})()`);
  const clip = { x: box[0] - 4, y: box[1] - 4, width: box[2] + 8, height: Math.min(box[3] + 8, maxHeight), scale: 1 };
  const r = await page("Page.captureScreenshot", { format: "png", clip, captureBeyondViewport: false });
  writeFileSync(join(out, name), Buffer.from(r.result.data, "base64"));
  await evaluate(`(()=>{const bar=document.querySelector('#mdbook-menu-bar, #menu-bar'); if (bar) bar.style.visibility=''; return 1})()`);
}
const click = (sel) => evaluate(`document.querySelector(${JSON.stringify(sel)}).click(), 1`);
async function runAndTime(step) {
  const t0 = await open(`step${step}.html`);
  await click(".wb-run");
  await until(`document.querySelector('.wb-sim').dataset.verdict`, `step ${step}'s verdict`);
  const v = await evaluate(`document.querySelector('.wb-sim').dataset.verdict`);
  const ms = Date.now() - t0;
  if (v !== "PASS") fail(`step ${step} verdict ${v}: ` + (await evaluate(`document.querySelector('.wb-verdict').textContent`)));
  const inWorker = await evaluate(`document.querySelector('.wb-time').textContent`);
  return { ms, inWorker };
}
async function open(chapter) {
  let t0 = Date.now();
  await page("Page.navigate", { url: book + chapter });
  // Under `cargo test` in a fresh CI clone a first navigation was seen never to commit (no
  // document body after 60 s, no console error, the server answering curl at once); navigate
  // again once, said in the log, and time the page from the navigation that loaded it.
  if (!(await settles(`!!document.body && document.readyState !== 'loading'`, 20000))) {
    console.log("note: " + chapter + " had not loaded 20 s after navigating; navigating again");
    t0 = Date.now();
    await page("Page.navigate", { url: book + chapter });
  }
  await until(`!!document.querySelector('.wb-sim[data-ready="1"]')`, chapter + "'s widget");
  return t0;
}
async function settles(expr, ms) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) { if (await evaluate(expr)) return true; await new Promise((r) => setTimeout(r, 100)); }
  return false;
}
// Step 0 and step 6 from page load to their verdict: the targets are 3 s and 6 s.
const r0 = await runAndTime(0);
if (r0.ms > BOUND.step0) fail(`step 0 took ${r0.ms} ms from load (bound ${BOUND.step0})`);
ok(`step 0 PASS in ${r0.ms} ms from load ${r0.inWorker}`);
await until(`document.querySelectorAll('.wb-swz td').length === 64`, "the swizzle table");
ok("layouts drawn");
const r6 = await runAndTime(6);
if (r6.ms > BOUND.step6) fail(`step 6 took ${r6.ms} ms from load (bound ${BOUND.step6})`);
ok(`step 6 PASS in ${r6.ms} ms from load ${r6.inWorker}`);
// Step 3: our kernel PASSes, then the player.
let t0 = await open("step3.html");
const offered = await evaluate(`document.querySelector('.wb-sim').dataset.source`);
if (offered !== "yours") fail("with --kernel the widget should offer your kernel first, it shows " + offered);
await click(".wb-src-ours");
await evaluate(`document.querySelector('.wb-run').click(), 1`);
await until(`document.querySelector('.wb-sim').dataset.verdict`, "step 3's verdict");
const v3 = await evaluate(`document.querySelector('.wb-sim').dataset.verdict`);
if (v3 !== "PASS") fail("step 3 verdict " + v3);
ok(`step 3 PASS in ${Date.now() - t0} ms from load`);
const ours = await evaluate(`[document.querySelector('.wb-sim').dataset.source, document.querySelector('.wb-source').textContent]`);
if (ours[0] !== "ours" || !/our kernel/.test(ours[1]) || !/kernel\.cu/.test(ours[1])) fail("the source line: " + ours.join(" | "));
ok("the widget names the source it ran: " + ours[1]);
await evaluate(`document.querySelector('.wb-sim').scrollIntoView(), 1`);
await shot("step3-pass.png");
const lanes = await evaluate(`document.querySelectorAll('.wb-lanes rect').length`);
if (!(lanes > 10)) fail("the player drew " + lanes + " spans");
const tEnd = +(await evaluate(`document.querySelector('.wb-player').dataset.t`));
await evaluate(`(()=>{const s=document.querySelector('.wb-scrub'); s.value=Math.floor(s.max/2); s.dispatchEvent(new Event('input')); return 1})()`);
const tMid = +(await evaluate(`document.querySelector('.wb-player').dataset.t`));
await evaluate(`[...document.querySelectorAll('.wb-controls button')].find(b=>b.textContent==='Step').click(), 1`);
const tStep = +(await evaluate(`document.querySelector('.wb-player').dataset.t`));
if (!(tMid < tEnd && tStep > tMid)) fail(`scrub/step: end ${tEnd}, mid ${tMid}, after step ${tStep}`);
const state = await evaluate(`document.querySelector('.wb-state').textContent`);
if (!/phase \d+, pending \d+, tx -?\d+/.test(state) || !/columns allocated/.test(state)) fail("the state panel: " + state);
ok(`player scrubs (${tMid}) and steps (${tStep}); state shows mbarriers and tensor memory`);
// A seeded bug: its rule, its line highlighted, the player at the stop.
await evaluate(`document.querySelector('.wb-bug[data-bug="no-fence-after-wait"]').click(), 1`);
await until(`document.querySelector('.wb-sim').dataset.verdict`, "the seeded bug's verdict");
const rule = await evaluate(`document.querySelector('.wb-sim').dataset.rule || document.querySelector('.wb-sim').dataset.verdict`);
const hl = await evaluate(`document.querySelector('.wb-hl') && document.querySelector('.wb-hl').dataset.line`);
const verdictText = await evaluate(`document.querySelector('.wb-verdict').textContent`);
if (!rule || rule === "PASS" || !verdictText.includes(rule)) fail("seeded bug: " + verdictText);
if (!hl) fail("seeded bug: no highlighted line (" + verdictText + ")");
const atStop = await evaluate(`document.querySelector('.wb-stop') !== null`);
if (!atStop) fail("the player is not at the stop");
ok(`seeded bug no-fence-after-wait: ${rule}, line ${hl} highlighted, player at the stop`);
await evaluate(`document.querySelector('.wb-verdict').scrollIntoView(), 1`);
await shot("step3-bug.png");
await shotOf("running-widget.png", ".wb-sim", 900);
// Every mdbook theme: the widget's text readable (contrast >= 4.5) and its marks visible
// against what is behind them (>= 1.5), in light (light, rust) and dark (coal, navy, ayu).
const themeCheck = `(() => {
  const rgba = (s) => { const m = s.match(/rgba?\\(([^)]+)\\)/); if (!m) return null; const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3])).concat(1);
  const bgOf = (el) => { const chain = []; for (let e = el; e && e.nodeType === 1; e = e.parentElement) chain.push(e);
    let c = [255, 255, 255, 1]; for (const e of chain.reverse()) { const b = rgba(getComputedStyle(e).backgroundColor); if (b && b[3] > 0) c = over(b, c); } return c; };
  const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const bad = [], seen = {};
  const text = (sel, prop) => { const e = document.querySelector(sel); if (!e) { bad.push(sel + " missing"); return; }
    const st = getComputedStyle(e); const fg = rgba(st[prop || "color"]); const r = ratio(over(fg, bgOf(e)), bgOf(e)); seen[sel] = +r.toFixed(2); if (r < 4.5) bad.push(sel + " text contrast " + r.toFixed(2)); };
  for (const s of [".wb-sim h4", ".wb-source", ".wb-verdict b", ".wb-run", ".wb-bug", ".wb-clock", ".wb-state", ".wb-stop", ".wb-hl", ".wb-listing"]) text(s);
  text(".wb-lane-name", "fill");
  const svgBg = bgOf(document.querySelector(".wb-lanes"));
  const fills = new Set([...document.querySelectorAll(".wb-lanes rect")].map((r) => getComputedStyle(r).fill));
  fills.add(getComputedStyle(document.querySelector(".wb-cursor")).stroke);
  for (const f of fills) { const c = rgba(f); const r = c ? ratio(over(c, svgBg), svgBg) : 0; seen[f] = +r.toFixed(2); if (r < 1.5) bad.push("mark " + f + " contrast " + r.toFixed(2)); }
  const v = document.querySelector(".wb-verdict"); const edge = ratio(rgba(getComputedStyle(v).borderLeftColor), bgOf(v));
  seen.verdictEdge = +edge.toFixed(2); if (edge < 3) bad.push("the verdict's edge contrast " + edge.toFixed(2));
  return { bad, seen, bg: bgOf(document.querySelector(".wb-sim")) };
})()`;
const themes = {};
for (const theme of ["light", "rust", "coal", "navy", "ayu"]) {
  await evaluate(`(() => { const h = document.documentElement; h.classList.remove("light", "rust", "coal", "navy", "ayu"); h.classList.add(${JSON.stringify(theme)}); return 1; })()`);
  const r = await evaluate(themeCheck);
  themes[theme] = r.seen;
  if (r.bad.length) fail(`theme ${theme} (background ${r.bg}): ${r.bad.join("; ")}`);
  if (theme === "coal") await shotOf("step3-bug-coal.png", ".wb-sim", 900);
}
ok("text readable and marks visible in the light, rust, coal, navy and ayu themes");
await evaluate(`(() => { const h = document.documentElement; h.classList.remove("rust", "coal", "navy", "ayu"); h.classList.add("light"); return 1; })()`);
// Your kernel (runner book --serve --kernel FILE --step 3): a seeded bug in it, so it must not
// pass where ours did.
await click(".wb-src-yours");
await click(".wb-run");
await until(`document.querySelector('.wb-sim').dataset.verdict`, "your kernel's verdict");
const yours = await evaluate(`[document.querySelector('.wb-sim').dataset.verdict, document.querySelector('.wb-sim').dataset.source, document.querySelector('.wb-source').textContent, document.querySelector('.wb-verdict').textContent]`);
if (yours[0] === "PASS" || yours[1] !== "yours" || !yours[2].includes(yourKernel)) fail("your kernel: " + yours.join(" | "));
ok(`your kernel runs in the page: ${yours[0]} (${yours[2]})`);
// An edit that does not compile: the page says so on the next run.
const good = readFileSync(yourKernel);
writeFileSync(yourKernel, good.toString() + "\nthis is not CUDA;\n");
await click(".wb-run");
await until(`document.querySelector('.wb-sim').dataset.verdict`, "your broken kernel's verdict");
const broken = await evaluate(`document.querySelector('.wb-verdict').textContent`);
writeFileSync(yourKernel, good);
if (!/does not compile/.test(broken)) fail("a kernel that does not compile: " + broken);
ok("your edit that does not compile is reported in the page");
// Your last trace (runner step 3 --sim --trace), one click.
await click(".wb-last-trace");
await until(`document.querySelector('.wb-sim').dataset.loaded`, "your last trace to load", 10000);
const lanesLast = await evaluate(`document.querySelectorAll('.wb-lanes rect').length`);
if (!(lanesLast > 10)) fail("your last trace drew " + lanesLast + " spans");
ok("your last trace loads with one click");
await evaluate(`delete document.querySelector('.wb-sim').dataset.loaded, 1`);
// A dropped trace file (runner step N --sim --trace).
const doc = await page("DOM.getDocument", {});
const q = await page("DOM.querySelector", { nodeId: doc.result.root.nodeId, selector: ".wb-trace-file" });
await page("DOM.setFileInputFiles", { nodeId: q.result.nodeId, files: [traceFile] });
await until(`document.querySelector('.wb-sim').dataset.loaded`, "the trace file to load", 10000);
ok("a trace file loads");
if (errors.length) fail("console errors: " + errors.join(" | "));
ok("no console errors");
writeFileSync(join(out, "timings.json"), JSON.stringify({ step0_ms_from_load: r0.ms, step6_ms_from_load: r6.ms,
  step0_in_worker: r0.inWorker, step6_in_worker: r6.inWorker, bounds_ms: BOUND, themes, checks }, null, 1));
cleanup(0);
