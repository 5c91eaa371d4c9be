//! `call` and `ret` at run time: each thread has a call stack of frames in its local memory and
//! its own register frame per activation; and the two CUDA runtime functions NVVM calls from
//! kernels, `vprintf` (device `printf`) and `__assertfail` (a failing `assert`).
//!
//! A thread's local memory holds its frames one after another: the entry's first, each callee's
//! above its caller's (16-byte aligned). A `.local` or `.param` variable of a function is at
//! its offset from the current frame's base (`Thread::frame`), so a local address (or a generic
//! one made from it with `cvta.local`) names the same bytes in every function, as a pointer to
//! a caller's local array must (PTX ISA, "Local State Space": per-thread private memory).

use crate::decode::{CallTarget, Instr, Op, Space};
use crate::error::SimError;
use crate::link::{LOCAL_BYTES_LIMIT, MAX_CALL_DEPTH};
use crate::machine::Machine;
use crate::printf;

/// One activation of a `.func` on a thread's call stack: where to go back to.
#[derive(Debug, Clone)]
pub(crate) struct CallFrame {
    /// The caller's: next instruction, frame base, function index.
    pub ret_pc: u32,
    pub frame: u32,
    pub func: u32,
    /// The callee's registers as they were before the call: an activation's registers are its
    /// own, so a recursive call cannot change its caller's.
    pub saved: Vec<u64>,
    /// (caller offset, callee offset, bytes) of each return value.
    pub rets: Vec<(u32, u32, u32)>,
}

/// The bytes CUDA's printf FIFO holds by default (`cudaLimitPrintfFifoSize`, 1 MiB).
pub const PRINTF_FIFO_BYTES: u64 = 1 << 20;

/// The longest string (format or `%s` argument) read before the simulator calls it
/// unterminated.
const MAX_STRING: usize = 1 << 16;

impl Machine<'_> {
    /// Execute `call` (counted by the caller): returns whether the pc advances.
    pub(crate) fn exec_call(&mut self, t: u32, ins: &Instr) -> Result<bool, SimError> {
        let Op::Call { target, rets, args } = &ins.op else {
            return Ok(true);
        };
        match *target {
            CallTarget::Func(f) => {
                self.call_func(t, f, rets, args)?;
                Ok(false)
            }
            CallTarget::Vprintf => {
                let base = self.threads[t as usize].frame;
                let fmt = self.frame_u64(t, base + args[0].0)?;
                let buf = self.frame_u64(t, base + args[1].0)?;
                let r = self.vprintf(t, fmt, buf)?;
                if let Some(&(o, _)) = rets.first() {
                    self.frame_write(t, base + o, &r.to_le_bytes())?;
                }
                Ok(true)
            }
            CallTarget::AssertFail => Err(self.assert_fail(t, ins, args)),
        }
    }

    fn frame_u64(&mut self, t: u32, at: u32) -> Result<u64, SimError> {
        let mut b = [0u8; 8];
        self.read_bytes(t, crate::exec::Loc::Local(at as u64), &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn frame_write(&mut self, t: u32, at: u32, data: &[u8]) -> Result<(), SimError> {
        self.write_bytes(t, crate::exec::Loc::Local(at as u64), data)
    }

    fn call_func(
        &mut self,
        t: u32,
        f: u32,
        rets: &[(u32, u32)],
        args: &[(u32, u32)],
    ) -> Result<(), SimError> {
        let k = self.k;
        let callee = &k.funcs[f as usize];
        let th = &self.threads[t as usize];
        if th.calls.len() >= MAX_CALL_DEPTH {
            return Err(self.fault(
                t,
                format!(
                    "call of {}: more than {MAX_CALL_DEPTH} nested calls (runaway recursion?); the simulator bounds the call depth where a GPU overflows its stack (cudaLimitStackSize)",
                    callee.name
                ),
            ));
        }
        let caller = &k.funcs[th.func as usize];
        let base = (th.frame + caller.frame_bytes).next_multiple_of(16);
        let top = base as u64 + callee.frame_bytes as u64;
        if top > LOCAL_BYTES_LIMIT as u64 {
            return Err(self.fault(
                t,
                format!(
                    "call of {}: the thread's frames need {top} bytes of local memory, past the {LOCAL_BYTES_LIMIT} bytes a thread may have (stack overflow)",
                    callee.name
                ),
            ));
        }
        let (reg_base, nregs, pc) = (callee.reg_base as usize, callee.nregs as usize, callee.pc);
        let th = &mut self.threads[t as usize];
        if th.local.len() < top as usize {
            th.local.resize(top as usize, 0);
        }
        let caller_frame = th.frame;
        for (&(from, n), &(to, _)) in args.iter().zip(&callee.params) {
            let (from, to, n) = (
                (caller_frame + from) as usize,
                (base + to) as usize,
                n as usize,
            );
            th.local.copy_within(from..from + n, to);
        }
        let saved = th.regs[reg_base..reg_base + nregs].to_vec();
        let ret_map = rets
            .iter()
            .zip(&callee.rets)
            .map(|(&(c, n), &(e, _))| (c, e, n))
            .collect();
        th.calls.push(CallFrame {
            ret_pc: th.pc + 1,
            frame: caller_frame,
            func: th.func,
            saved,
            rets: ret_map,
        });
        th.frame = base;
        th.func = f;
        th.pc = pc;
        Ok(())
    }

    /// `ret` inside a `.func`: the return values to the caller's `.param` variables, the
    /// callee's registers as they were, and on at the instruction after the call.
    pub(crate) fn exec_ret(&mut self, t: u32) {
        let k = self.k;
        let th = &mut self.threads[t as usize];
        let Some(fr) = th.calls.pop() else {
            return;
        };
        let callee = &k.funcs[th.func as usize];
        for &(c, e, n) in &fr.rets {
            let (from, to, n) = ((th.frame + e) as usize, (fr.frame + c) as usize, n as usize);
            th.local.copy_within(from..from + n, to);
        }
        let rb = callee.reg_base as usize;
        th.regs[rb..rb + fr.saved.len()].copy_from_slice(&fr.saved);
        th.frame = fr.frame;
        th.func = fr.func;
        th.pc = fr.ret_pc;
    }

    /// A NUL-terminated string at generic address `a`.
    fn c_string(&mut self, t: u32, a: u64) -> Result<Vec<u8>, SimError> {
        let mut s = Vec::new();
        loop {
            let loc = self.resolve(t, Space::Generic, a + s.len() as u64, 1)?;
            let mut b = [0u8];
            self.read_bytes(t, loc, &mut b)?;
            if b[0] == 0 {
                return Ok(s);
            }
            s.push(b[0]);
            if s.len() >= MAX_STRING {
                return Err(self.fault(
                    t,
                    format!("a string at {a:#x} without its terminating NUL in {MAX_STRING} bytes"),
                ));
            }
        }
    }

    /// `vprintf(format, args)`: the text goes to [`crate::RunReport::printf`]. Returns what
    /// CUDA's printf returns: the number of arguments consumed, or -1 for a null format.
    fn vprintf(&mut self, t: u32, fmt: u64, buf: u64) -> Result<i32, SimError> {
        if fmt == 0 {
            return Ok(-1);
        }
        let f = self.c_string(t, fmt)?;
        struct A<'m, 'a> {
            m: &'m mut Machine<'a>,
            t: u32,
            buf: u64,
            err: Option<SimError>,
        }
        impl printf::Args for A<'_, '_> {
            fn arg(&mut self, off: u64, n: u32) -> Result<u64, String> {
                let r = (|| {
                    let loc = self.m.resolve(self.t, Space::Generic, self.buf + off, n)?;
                    let mut b = [0u8; 8];
                    self.m.read_bytes(self.t, loc, &mut b[..n as usize])?;
                    Ok(u64::from_le_bytes(b))
                })();
                r.map_err(|e: SimError| {
                    self.err = Some(e);
                    String::new()
                })
            }
            fn string(&mut self, a: u64) -> Result<Vec<u8>, String> {
                self.m.c_string(self.t, a).map_err(|e| {
                    self.err = Some(e);
                    String::new()
                })
            }
        }
        let mut a = A {
            m: self,
            t,
            buf,
            err: None,
        };
        let r = printf::format(&f, &mut a);
        let err = a.err.take();
        let (text, n) = match (r, err) {
            (_, Some(e)) => return Err(e),
            (Err(e), None) => return Err(self.fault(t, format!("printf: {e}"))),
            (Ok(x), None) => x,
        };
        self.printf_out(text);
        Ok(n as i32)
    }

    /// Keep one printf's text within the FIFO's bound. The GPU's buffer is circular: when a
    /// kernel prints more than it holds, the oldest output is overwritten (CUDA C++ Programming
    /// Guide, "Formatted Output"), so the simulator keeps the newest output and counts the calls
    /// dropped from the front.
    fn printf_out(&mut self, text: String) {
        let r = &mut self.report;
        r.printf_bytes += text.len() as u64;
        r.printf.push(text);
        let mut drop = 0;
        while r.printf_bytes > PRINTF_FIFO_BYTES && drop < r.printf.len() {
            r.printf_bytes -= r.printf[drop].len() as u64;
            drop += 1;
        }
        if drop > 0 {
            r.printf.drain(..drop);
            r.printf_dropped += drop as u64;
        }
    }

    /// `__assertfail(message, file, line, function, char_size)`: the run ends as the GPU's
    /// trap does, with what the CUDA runtime prints.
    fn assert_fail(&mut self, t: u32, ins: &Instr, args: &[(u32, u32)]) -> SimError {
        let base = self.threads[t as usize].frame;
        let text = |m: &mut Self, i: usize| -> String {
            match m.frame_u64(t, base + args[i].0) {
                Ok(0) => String::new(),
                Ok(a) => m
                    .c_string(t, a)
                    .map(|s| String::from_utf8_lossy(&s).into_owned())
                    .unwrap_or_else(|e| format!("<unreadable: {e}>")),
                Err(e) => format!("<unreadable: {e}>"),
            }
        };
        let message = text(self, 0);
        let file = text(self, 1);
        let function = text(self, 3);
        let mut lb = [0u8; 4];
        let line = match self.read_bytes(
            t,
            crate::exec::Loc::Local((base + args[2].0) as u64),
            &mut lb,
        ) {
            Ok(()) => u32::from_le_bytes(lb),
            Err(_) => 0,
        };
        let th = &self.threads[t as usize];
        let cta = &self.ctas[th.cta as usize];
        SimError::Assert(Box::new(crate::error::Assertion {
            message,
            file,
            line,
            function,
            block: cta.ctaid,
            thread: th.tid,
            ptx_line: ins.ptx_line,
            source_line: self.src_line(ins),
        }))
    }
}
