//! The words of the `--trace` lines: barriers by the name the kernel gave them (the launch's
//! table, else the `mbarrier_init(...)` expression of their source line, as the deadlock report
//! names them), shared-memory places by CTA rank and offset, sizes with units. A trace line is
//! read by a student, so it never prints a Rust tuple such as `[(1, 33792)]`.

use crate::machine::Machine;

/// A size: `512 bytes`, `16 KiB` (whole KiB), `1636 bytes (1.6 KiB)`.
pub(crate) fn bytes(n: u64) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else if n >= 1024 {
        format!("{n} bytes ({:.1} KiB)", n as f64 / 1024.0)
    } else if n == 1 {
        "1 byte".to_string()
    } else {
        format!("{n} bytes")
    }
}

/// A barrier: `smem.load_full[2] of CTA rank 1`; a kernel that gives no name (hand-written PTX
/// without sources) leaves only its place: `the mbarrier at shared-memory offset 0x28420 of CTA
/// rank 1`.
pub(crate) fn barrier(m: &Machine, cta: u32, off: u32) -> String {
    let rank = m.ctas.get(cta as usize).map_or(cta, |c| c.rank);
    match crate::deadlock::barrier_name(m, cta, off) {
        Some(name) => format!("{name} of CTA rank {rank}"),
        None => format!("the mbarrier at shared-memory offset {off:#x} of CTA rank {rank}"),
    }
}

/// Where a barrier should be, for reports about a place that holds none (not initialised, or
/// invalidated): the kernel's name for it where the launch's table has one, and its offset.
pub(crate) fn barrier_place(m: &Machine, cta: u32, off: u32) -> String {
    let rank = m.ctas.get(cta as usize).map_or(cta, |c| c.rank);
    let rel = off.wrapping_sub(m.dyn_off);
    match m.l.barrier_names.iter().find(|(o, _)| *o == rel) {
        Some((_, name)) => {
            format!("{name} of CTA rank {rank} (shared-memory offset {off:#x})")
        }
        None => format!("shared-memory offset {off:#x} of CTA rank {rank}"),
    }
}

/// A shared-memory place: `shared-memory offset 0x8400 of CTA rank 1`.
pub(crate) fn smem(m: &Machine, cta: u32, off: u32) -> String {
    let rank = m.ctas.get(cta as usize).map_or(cta, |c| c.rank);
    format!("shared-memory offset {off:#x} of CTA rank {rank}")
}

/// A list in words: `a`, `a and b`, `a, b and c`.
pub(crate) fn list(items: Vec<String>) -> String {
    match items.len() {
        0 => "nothing".to_string(),
        1 => items.into_iter().next().unwrap_or_default(),
        n => format!("{} and {}", items[..n - 1].join(", "), items[n - 1]),
    }
}

/// A TMA load that landed: how much, where, and the barrier each copy completed on.
pub(crate) fn tma_landed(
    m: &Machine,
    line: u32,
    bytes_each: u32,
    dst: &[(u32, u32)],
    mbar: &[(u32, u32)],
) -> String {
    let places = list(
        dst.iter()
            .zip(mbar)
            .map(|(&(c, o), &(bc, bo))| {
                format!("{} (complete_tx on {})", smem(m, c, o), barrier(m, bc, bo))
            })
            .collect(),
    );
    format!(
        "TMA load (PTX line {line}) landed: {} into {places}",
        bytes(u64::from(bytes_each))
    )
}

/// A TMA load issued: its box, how much each copy writes and where, and its barriers.
pub(crate) fn tma_issued(
    m: &Machine,
    line: u32,
    at: &[i32],
    bytes_each: u32,
    dst: &[(u32, u32)],
    mbar: &[(u32, u32)],
) -> String {
    let places = list(dst.iter().map(|&(c, o)| smem(m, c, o)).collect());
    let bars = list(mbar.iter().map(|&(c, o)| barrier(m, c, o)).collect());
    format!(
        "TMA load issued (PTX line {line}), box at {}, {} into {places}, completes on {bars}",
        coords(at),
        bytes(u64::from(bytes_each))
    )
}

/// A `tcgen05.commit` issued: the barriers it will arrive on.
pub(crate) fn commit_issued(m: &Machine, line: u32, targets: &[(u32, u32)]) -> String {
    let on = list(targets.iter().map(|&(c, o)| barrier(m, c, o)).collect());
    format!("tcgen05.commit issued (PTX line {line}), will arrive on {on}")
}

/// A `tcgen05.commit` that arrived: each barrier with the phase it arrived in.
pub(crate) fn commit_arrived(m: &Machine, line: u32, arrived: &[(u32, u32, u64)]) -> String {
    let on = list(
        arrived
            .iter()
            .map(|&(c, o, p)| format!("{} (phase {p})", barrier(m, c, o)))
            .collect(),
    );
    format!("tcgen05.commit (PTX line {line}) arrived on {on}")
}

/// A box's coordinates: `(64, 128)`.
pub(crate) fn coords(c: &[i32]) -> String {
    let v: Vec<String> = c.iter().map(|x| x.to_string()).collect();
    format!("({})", v.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_units() {
        assert_eq!(bytes(16), "16 bytes");
        assert_eq!(bytes(1), "1 byte");
        assert_eq!(bytes(16384), "16 KiB");
        assert_eq!(bytes(33792), "33 KiB");
        assert_eq!(bytes(1536 + 100), "1636 bytes (1.6 KiB)");
    }

    #[test]
    fn lists_read_as_words() {
        assert_eq!(list(vec![]), "nothing");
        assert_eq!(list(vec!["a".into()]), "a");
        assert_eq!(list(vec!["a".into(), "b".into()]), "a and b");
        assert_eq!(list(vec!["a".into(), "b".into(), "c".into()]), "a, b and c");
        assert_eq!(coords(&[64, 128]), "(64, 128)");
    }
}
