//! Memory: the byte reads and writes of each state space (global, shared::cluster, local,
//! param) once an address is resolved, and the address an operand names.

use crate::decode::Opd;
use crate::error::SimError;
use crate::machine::Machine;
use crate::rules;

impl<'a> Machine<'a> {
    pub(crate) fn read_bytes(&mut self, t: u32, loc: Loc, out: &mut [u8]) -> Result<(), SimError> {
        let n = out.len();
        match loc {
            Loc::Global(a) => {
                if !self.dev.read(a, out) {
                    return Err(self.fault(
                        t,
                        format!(
                            "global read of {n} bytes at {a:#x}: not an allocation of this launch"
                        ),
                    ));
                }
                if self.xr.on() {
                    self.global_access(t, a, n as u64, false)?;
                }
            }
            Loc::Shared(c, o) => {
                self.check_init(t, c, o, n as u32, "")?;
                out.copy_from_slice(&self.ctas[c as usize].smem[o as usize..o as usize + n]);
            }
            Loc::Local(o) => {
                let th = &self.threads[t as usize];
                let end = o as usize + n;
                if end > th.local.len() {
                    return Err(self.fault(
                        t,
                        format!(
                            "local read at {o:#x} past the frame of {} bytes",
                            th.local.len()
                        ),
                    ));
                }
                out.copy_from_slice(&th.local[o as usize..end]);
            }
            Loc::Param(o) => {
                let end = o as usize + n;
                // A CUtensorMap's bytes are the driver's opaque encoding: the simulator holds a
                // description instead, so a kernel may use a map's address (TMA, prefetch) but
                // not read it; reading it would also tell the simulator from a GPU.
                if self
                    .maps
                    .iter()
                    .any(|(m, _)| (o as usize) < *m as usize + 128 && end > *m as usize)
                {
                    return Err(self.fault(t, format!("the kernel reads bytes {o:#x}..{end:#x} of a CUtensorMap parameter: its encoding is the CUDA driver's and opaque, and the simulator does not model it (a kernel passes the map's address to cp.async.bulk.tensor and never reads it)")));
                }
                if end > self.params.len() {
                    return Err(self.fault(
                        t,
                        format!(
                            "parameter read at {o:#x} past the {} bytes of parameters",
                            self.params.len()
                        ),
                    ));
                }
                out.copy_from_slice(&self.params[o as usize..end]);
            }
        }
        Ok(())
    }

    pub(crate) fn write_bytes(&mut self, t: u32, loc: Loc, data: &[u8]) -> Result<(), SimError> {
        let n = data.len();
        self.progress = self.steps;
        match loc {
            Loc::Global(a) => {
                if !self.dev.write(a, data) {
                    return Err(self.fault(
                        t,
                        format!(
                            "global write of {n} bytes at {a:#x}: not an allocation of this launch"
                        ),
                    ));
                }
                if self.xr.on() {
                    self.global_access(t, a, n as u64, true)?;
                }
            }
            Loc::Shared(c, o) => {
                rules::generic_smem_write(self, t, c, o, n as u32)?;
                self.ctas[c as usize].smem[o as usize..o as usize + n].copy_from_slice(data);
                self.ctas[c as usize].init.mark(o, n as u32);
            }
            Loc::Local(o) => {
                let th = &mut self.threads[t as usize];
                let end = o as usize + n;
                if end > th.local.len() {
                    let len = th.local.len();
                    return Err(self.fault(
                        t,
                        format!("local write at {o:#x} past the frame of {len} bytes"),
                    ));
                }
                th.local[o as usize..end].copy_from_slice(data);
            }
            Loc::Param(_) => return Err(self.fault(t, "a write to kernel parameters")),
        }
        Ok(())
    }

    /// The address an `[addr]` operand names (or a register/immediate used as one).
    pub(crate) fn addr_of(&self, t: u32, o: &Opd) -> (u64, bool) {
        match o {
            Opd::Addr(b, off) => (self.base_value(t, b).wrapping_add(*off as u64), true),
            o => (self.rv(t, o), false),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Loc {
    Global(u64),
    Shared(u32, u32),
    Local(u64),
    Param(u64),
}
