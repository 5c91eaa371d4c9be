// The simulator's Web Worker: loads simweb.wasm (steps/simweb, built by `runner book`) and
// answers {id, fn, req, url} with the module's JSON answer. The byte-buffer ABI is the one
// steps/simweb/src/ffi.rs documents: wb_alloc, then wb_run/wb_layouts, then wb_out_ptr/len.
let wasm = null;
async function init(base) {
  const bytes = await (await fetch(base + "simweb.wasm")).arrayBuffer();
  const { instance } = await WebAssembly.instantiate(bytes, {});
  wasm = instance.exports;
}
function call(fn, obj) {
  const enc = new TextEncoder().encode(JSON.stringify(obj));
  const p = wasm.wb_alloc(enc.length);
  new Uint8Array(wasm.memory.buffer, p, enc.length).set(enc);
  const n = wasm[fn](p, enc.length);
  const q = wasm.wb_out_ptr();
  return JSON.parse(new TextDecoder().decode(new Uint8Array(wasm.memory.buffer, q, n).slice()));
}
onmessage = async (e) => {
  const { id, base, fn, req, url } = e.data;
  try {
    if (!wasm) await init(base);
    let r = req;
    let kernel = null;
    if (url) {
      kernel = await (await fetch(url, { cache: "no-store" })).json();
      // The reader's kernel that does not compile (runner book --serve --kernel).
      if (kernel.error) { postMessage({ id, out: { verdict: "does not compile", message: kernel.error } }); return; }
      r = Object.assign({}, kernel, req);
    }
    const t0 = performance.now();
    const out = call(fn, r);
    out.wall_ms = Math.round(performance.now() - t0);
    if (kernel) out.sources = kernel.sources;
    postMessage({ id, out });
  } catch (err) {
    postMessage({ id, out: { verdict: "error", message: String(err) } });
  }
};
