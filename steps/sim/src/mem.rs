//! Global memory (the simulated device's allocations) and the generic address map.
//!
//! Generic addresses (what `cvta` produces and generic `ld`/`st` use) are split into windows:
//! global allocations from [`GLOBAL_BASE`], the cluster's shared memory from [`SHARED_WINDOW`]
//! (plus a shared::cluster address), the thread's local memory from [`LOCAL_WINDOW`] and the
//! kernel's parameters from [`PARAM_WINDOW`]. A shared::cta or shared::cluster address is
//! `rank << 24 | offset` (`crate::dsmem`), and the generic address of the same byte is
//! `SHARED_WINDOW` plus it.

/// First global address handed out.
pub const GLOBAL_BASE: u64 = 0x0000_0001_0000_0000;
pub const SHARED_WINDOW: u64 = 0x0000_7000_0000_0000;
pub const LOCAL_WINDOW: u64 = 0x0000_7100_0000_0000;
pub const PARAM_WINDOW: u64 = 0x0000_7200_0000_0000;
/// Width of each non-global window.
pub const WINDOW_BYTES: u64 = 0x0000_0001_0000_0000;

/// The device's global memory: allocations are carved from one growing buffer.
#[derive(Debug, Default, Clone)]
pub struct Device {
    mem: Vec<u8>,
}

impl Device {
    pub fn new() -> Device {
        Device::default()
    }

    /// Allocate `bytes` (256-byte aligned, zero-filled) and return its global address.
    pub fn alloc(&mut self, bytes: u64) -> u64 {
        let start = (self.mem.len() as u64).next_multiple_of(256);
        self.mem.resize((start + bytes.max(1)) as usize, 0);
        GLOBAL_BASE + start
    }

    fn range(&self, addr: u64, len: usize) -> Option<std::ops::Range<usize>> {
        let off = addr.checked_sub(GLOBAL_BASE)? as usize;
        let end = off.checked_add(len)?;
        (end <= self.mem.len()).then_some(off..end)
    }

    /// Copy `data` to `addr`; false when the range is not allocated.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> bool {
        match self.range(addr, data.len()) {
            Some(r) => {
                self.mem[r].copy_from_slice(data);
                true
            }
            None => false,
        }
    }

    /// Copy from `addr` into `out`; false when the range is not allocated.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> bool {
        match self.range(addr, out.len()) {
            Some(r) => {
                out.copy_from_slice(&self.mem[r]);
                true
            }
            None => false,
        }
    }

    /// The bytes at `addr..addr+len`, if allocated.
    pub fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let r = self.range(addr, len)?;
        Some(&mut self.mem[r])
    }
    pub fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let r = self.range(addr, len)?;
        Some(&self.mem[r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_read_write() {
        let mut d = Device::new();
        let a = d.alloc(10);
        let b = d.alloc(4);
        assert_eq!(a, GLOBAL_BASE);
        assert_eq!(b, GLOBAL_BASE + 256);
        assert!(d.write(b, &[1, 2, 3, 4]));
        let mut out = [0u8; 4];
        assert!(d.read(b, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(!d.write(b + 2, &[0; 4]), "past the end");
        assert!(!d.read(GLOBAL_BASE - 1, &mut out), "below the base");
    }
}
