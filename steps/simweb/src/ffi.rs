//! The byte-buffer ABI the page's worker (`book/widgets/sim-worker.js`) speaks: no generated
//! glue. The worker asks for a buffer (`wb_alloc`), copies a UTF-8 JSON request into it, calls
//! `wb_run` or `wb_layouts` (which free the request), and reads the answer, UTF-8 JSON, at
//! `wb_out_ptr()` for `wb_out_len()` bytes; the answer stays until the next call.

use std::cell::RefCell;

thread_local! {
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of `len` bytes for the caller to fill.
#[no_mangle]
pub extern "C" fn wb_alloc(len: usize) -> *mut u8 {
    let mut v = vec![0u8; len];
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// Take back a buffer of [`wb_alloc`].
///
/// # Safety
/// `ptr` and `len` are exactly what one `wb_alloc` call gave, not freed before.
#[no_mangle]
pub unsafe extern "C" fn wb_free(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        drop(Vec::from_raw_parts(ptr, len, len));
    }
}

/// The request buffer's text (the buffer is freed).
unsafe fn take(ptr: *mut u8, len: usize) -> Result<String, String> {
    if ptr.is_null() {
        return Err("no request".into());
    }
    let v = Vec::from_raw_parts(ptr, len, len);
    String::from_utf8(v).map_err(|_| "the request is not UTF-8".into())
}

fn answer(v: serde_json::Value) -> usize {
    let bytes = v.to_string().into_bytes();
    let n = bytes.len();
    OUT.with(|o| *o.borrow_mut() = bytes);
    n
}

fn error(msg: String) -> usize {
    answer(serde_json::json!({"verdict": "error", "message": msg}))
}

/// Run a [`crate::RunRequest`]; returns the answer's length.
///
/// # Safety
/// `ptr`/`len` come from [`wb_alloc`], filled with the request; the call frees them.
#[no_mangle]
pub unsafe extern "C" fn wb_run(ptr: *mut u8, len: usize) -> usize {
    let text = match take(ptr, len) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    match serde_json::from_str::<crate::RunRequest>(&text) {
        Ok(req) => answer(crate::run(&req)),
        Err(e) => error(format!("bad request: {e}")),
    }
}

/// [`crate::layouts`] of a JSON request; returns the answer's length.
///
/// # Safety
/// As [`wb_run`].
#[no_mangle]
pub unsafe extern "C" fn wb_layouts(ptr: *mut u8, len: usize) -> usize {
    let text = match take(ptr, len) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(v) => answer(crate::layouts(&v)),
        Err(e) => error(format!("bad request: {e}")),
    }
}

/// Where the last answer is.
#[no_mangle]
pub extern "C" fn wb_out_ptr() -> *const u8 {
    OUT.with(|o| o.borrow().as_ptr())
}

/// The last answer's length.
#[no_mangle]
pub extern "C" fn wb_out_len() -> usize {
    OUT.with(|o| o.borrow().len())
}
