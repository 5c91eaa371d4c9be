// The widgets in a real browser: headless Chromium (Debian's /usr/bin/chromium) driven over
// the DevTools protocol with Node's own WebSocket (node --experimental-websocket; no npm
// package). Usage: node --experimental-websocket browser.mjs URL_OF_BOOK OUT_DIR TRACE_FILE
// Asserts: step 3's widget runs and shows PASS; a seeded bug shows its rule and highlights
// its line; the player steps and scrubs; a dropped trace file loads; no console errors.
// Screenshots go to OUT_DIR. Exit 0 when every check passed.
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [book, out, traceFile] = process.argv.slice(2);
const chromium = process.env.WORKBOOK_CHROMIUM || "/usr/bin/chromium";
const profile = mkdtempSync(join(tmpdir(), "wb-chromium-"));
const proc = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", `--user-data-dir=${profile}`,
  "--remote-debugging-port=0", "--window-size=1200,1600", "about:blank"], { stdio: ["ignore", "ignore", "pipe"] });
const fail = (m) => { console.error("FAIL: " + m); cleanup(1); };
function cleanup(code) { try { proc.kill(); } catch {} try { rmSync(profile, { recursive: true, force: true }); } catch {} process.exit(code); }
setTimeout(() => fail("timed out after 120 s"), 120000);
const wsUrl = await new Promise((res, rej) => {
  let buf = "";
  proc.stderr.on("data", (d) => { buf += d; const m = buf.match(/DevTools listening on (ws:\/\/\S+)/); if (m) res(m[1]); });
  proc.on("exit", (c) => rej(new Error("chromium exited " + c + ": " + buf)));
}).catch((e) => fail(e.message));
const browser = new WebSocket(wsUrl);
await new Promise((r) => (browser.onopen = r));
let id = 0; const pending = new Map(); const errors = [];
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
  fail("waited " + ms + " ms for " + what);
}
async function shot(name) {
  const r = await page("Page.captureScreenshot", { format: "png", captureBeyondViewport: false });
  writeFileSync(join(out, name), Buffer.from(r.result.data, "base64"));
}
const checks = [];
const ok = (m) => { checks.push(m); console.log("ok: " + m); };

async function open(chapter) {
  const t0 = Date.now();
  await page("Page.navigate", { url: book + chapter });
  await until(`!!document.querySelector('.wb-sim[data-ready="1"]')`, chapter + "'s widget");
  return t0;
}
// Step 0 from page load to its verdict: the target is 3 s.
let t0 = await open("step0.html");
await evaluate(`document.querySelector('.wb-run').click(), 1`);
await until(`document.querySelector('.wb-sim').dataset.verdict`, "step 0's verdict");
const v0 = await evaluate(`document.querySelector('.wb-sim').dataset.verdict`);
const ms0 = Date.now() - t0;
if (v0 !== "PASS") fail("step 0 verdict " + v0);
ok(`step 0 PASS in ${ms0} ms from load`);
await until(`document.querySelectorAll('.wb-swz td').length === 64`, "the swizzle table");
ok("layouts drawn");
// Step 3: PASS, then the player.
t0 = await open("step3.html");
await evaluate(`document.querySelector('.wb-run').click(), 1`);
await until(`document.querySelector('.wb-sim').dataset.verdict`, "step 3's verdict");
const v3 = await evaluate(`document.querySelector('.wb-sim').dataset.verdict`);
if (v3 !== "PASS") fail("step 3 verdict " + v3);
ok(`step 3 PASS in ${Date.now() - t0} ms from load`);
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
// A dropped trace file (runner step N --sim --trace).
const doc = await page("DOM.getDocument", {});
const q = await page("DOM.querySelector", { nodeId: doc.result.root.nodeId, selector: ".wb-trace-file" });
await page("DOM.setFileInputFiles", { nodeId: q.result.nodeId, files: [traceFile] });
await until(`document.querySelector('.wb-sim').dataset.loaded`, "the trace file to load", 10000);
ok("a trace file loads");
if (errors.length) fail("console errors: " + errors.join(" | "));
ok("no console errors");
writeFileSync(join(out, "timings.json"), JSON.stringify({ step0_ms_from_load: ms0, checks }, null, 1));
cleanup(0);
