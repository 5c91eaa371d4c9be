//! Warp-level `mma.sync.aligned` with the fragment layouts of the PTX ISA (9.7.14.5 "Matrix
//! multiply-accumulate operation using mma instruction", sections "Matrix Fragments for
//! mma.m16n8k4", "... mma.m16n8k8" and "... mma.m16n8k16 with floating point type"). Pure
//! functions over the 32 lanes' registers; the core gathers and scatters them.
//!
//! In every fragment, `groupID = laneid >> 2` and `threadID_in_group = laneid % 4` (the ISA's
//! names; `g` and `t` below). Packed 16-bit operands hold element `2j` in the low half of
//! register `j` and `2j + 1` in the high half ("Elements (low to high)").
//!
//! Numerics: each D element is a chain of fused multiply-adds over k from C. The hardware's
//! internal order and intermediate precision are not documented; the tests use small integers,
//! for which every order is exact.

use super::numeric::{bf16_to_f32, f16_to_f32, f32_to_f16, FloatRound};

/// `.m16n8k{4,8,16}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmaShape {
    M16N8K4,
    M16N8K8,
    M16N8K16,
}

impl MmaShape {
    pub fn k(self) -> u32 {
        match self {
            MmaShape::M16N8K4 => 4,
            MmaShape::M16N8K8 => 8,
            MmaShape::M16N8K16 => 16,
        }
    }
}

/// Element type of A and B (`.atype` = `.btype` for these shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmaAb {
    F16,
    Bf16,
    Tf32,
}

/// One legal `mma.sync.aligned.{shape}.row.col.{dtype}.{atype}.{btype}.{ctype}` form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaSyncForm {
    pub shape: MmaShape,
    pub ab: MmaAb,
    /// `.dtype` and `.ctype` are f32 (else f16, only with `.f16` A and B).
    pub d_f32: bool,
    pub c_f32: bool,
}

impl MmaSyncForm {
    /// The form if the PTX ISA defines it ("mma" syntax, "Floating point MMA" table):
    /// `.m16n8k8` and `.m16n8k16` with `.f16` (D and C each `.f16` or `.f32`) or `.bf16`
    /// (D and C `.f32`); `.m16n8k4` and `.m16n8k8` with `.tf32` (D and C `.f32`).
    pub fn new(shape: MmaShape, ab: MmaAb, d_f32: bool, c_f32: bool) -> Option<MmaSyncForm> {
        let ok = match ab {
            MmaAb::F16 => shape != MmaShape::M16N8K4,
            MmaAb::Bf16 => shape != MmaShape::M16N8K4 && d_f32 && c_f32,
            MmaAb::Tf32 => shape != MmaShape::M16N8K16 && d_f32 && c_f32,
        };
        ok.then_some(MmaSyncForm {
            shape,
            ab,
            d_f32,
            c_f32,
        })
    }

    fn per_reg(self) -> u32 {
        if self.ab == MmaAb::Tf32 {
            1
        } else {
            2
        }
    }

    /// Registers each lane holds of A, B, C, D.
    pub fn regs(self) -> [usize; 4] {
        let k = self.shape.k();
        let a = 16 * k / 32 / self.per_reg();
        let b = 8 * k / 32 / self.per_reg();
        let cd = |f32: bool| if f32 { 4 } else { 2 };
        [a as usize, b as usize, cd(self.c_f32), cd(self.d_f32)]
    }

    /// (row, k) of element `i` of lane `lane`'s A fragment.
    pub fn a_coord(self, lane: u32, i: u32) -> (u32, u32) {
        let (g, t) = (lane >> 2, lane % 4);
        match (self.ab, self.shape) {
            // tf32 m16n8k4: a0 row g, a1 row g+8; column t.
            (MmaAb::Tf32, MmaShape::M16N8K4) => (g + 8 * i, t),
            // tf32 m16n8k8: rows g for a0, a2 and g+8 for a1, a3; columns t for a0, a1 and
            // t+4 for a2, a3.
            (MmaAb::Tf32, _) => (g + 8 * (i % 2), t + 4 * (i / 2)),
            // 16-bit m16n8k8: a0, a1 row g, a2, a3 row g+8; column 2t + (i & 1).
            // 16-bit m16n8k16: as k8 for a0..a3, and a4..a7 eight columns on.
            _ => (g + 8 * ((i / 2) % 2), 2 * t + (i & 1) + 8 * (i / 4)),
        }
    }

    /// (k, col) of element `i` of lane `lane`'s B fragment.
    pub fn b_coord(self, lane: u32, i: u32) -> (u32, u32) {
        let (g, t) = (lane >> 2, lane % 4);
        match self.ab {
            // tf32: b0 row t, b1 row t+4; column g.
            MmaAb::Tf32 => (t + 4 * i, g),
            // 16-bit: b0, b1 rows 2t, 2t+1 (k8); b2, b3 eight rows on (k16); column g.
            _ => (2 * t + (i & 1) + 8 * (i / 2), g),
        }
    }

    /// (row, col) of element `i` (0..3) of the C and D fragments: c0, c1 row g, c2, c3 row
    /// g+8; column 2t + (i & 1). The same for f32 (one element a register) and f16 (two).
    pub fn cd_coord(lane: u32, i: u32) -> (u32, u32) {
        let (g, t) = (lane >> 2, lane % 4);
        (g + 8 * (i / 2), 2 * t + (i & 1))
    }

    fn element(self, regs: &[u32], i: u32) -> f32 {
        match self.ab {
            // tf32 keeps f32's sign, exponent and the top 10 mantissa bits (PTX ISA
            // "Alternate Floating-Point Data Formats"); the low 13 bits are not part of it.
            MmaAb::Tf32 => f32::from_bits(regs[i as usize] & !0x1FFF),
            MmaAb::F16 => f16_to_f32(half(regs, i)),
            MmaAb::Bf16 => bf16_to_f32(half(regs, i)),
        }
    }

    /// Runs the MMA: `a[lane]`, `b[lane]`, `c[lane]` are each lane's registers; returns each
    /// lane's D registers. `D = A * B + C` with A 16 x K (row), B K x 8 (col).
    pub fn execute(self, a: &[Vec<u32>], b: &[Vec<u32>], c: &[Vec<u32>]) -> Vec<Vec<u32>> {
        let k = self.shape.k();
        let mut am = vec![0f32; 16 * k as usize];
        let mut bm = vec![0f32; k as usize * 8];
        let mut cm = [0f32; 16 * 8];
        for lane in 0..32u32 {
            let l = lane as usize;
            for i in 0..(a[l].len() as u32 * self.per_reg()) {
                let (r, kk) = self.a_coord(lane, i);
                am[(r * k + kk) as usize] = self.element(&a[l], i);
            }
            for i in 0..(b[l].len() as u32 * self.per_reg()) {
                let (kk, n) = self.b_coord(lane, i);
                bm[(kk * 8 + n) as usize] = self.element(&b[l], i);
            }
            for i in 0..4 {
                let (r, n) = Self::cd_coord(lane, i);
                cm[(r * 8 + n) as usize] = if self.c_f32 {
                    f32::from_bits(c[l][i as usize])
                } else {
                    f16_to_f32(half(&c[l], i))
                };
            }
        }
        let mut out = Vec::with_capacity(32);
        for lane in 0..32u32 {
            let mut d = vec![0u32; self.regs()[3]];
            for i in 0..4 {
                let (r, n) = Self::cd_coord(lane, i);
                let mut acc = cm[(r * 8 + n) as usize];
                for kk in 0..k {
                    acc = am[(r * k + kk) as usize].mul_add(bm[(kk * 8 + n) as usize], acc);
                }
                if self.d_f32 {
                    d[i as usize] = acc.to_bits();
                } else {
                    let h = u32::from(f32_to_f16(acc, FloatRound::Rn));
                    d[(i / 2) as usize] |= h << (16 * (i % 2));
                }
            }
            out.push(d);
        }
        out
    }
}

fn half(regs: &[u32], i: u32) -> u16 {
    (regs[(i / 2) as usize] >> (16 * (i % 2))) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_element_of_each_fragment_is_held_by_exactly_one_lane_register() {
        for form in [
            MmaSyncForm::new(MmaShape::M16N8K16, MmaAb::F16, true, true),
            MmaSyncForm::new(MmaShape::M16N8K8, MmaAb::Bf16, true, true),
            MmaSyncForm::new(MmaShape::M16N8K8, MmaAb::Tf32, true, true),
            MmaSyncForm::new(MmaShape::M16N8K4, MmaAb::Tf32, true, true),
        ] {
            let f = form.unwrap();
            let k = f.shape.k();
            let [na, nb, _, _] = f.regs();
            let mut seen_a = vec![0; (16 * k) as usize];
            let mut seen_b = vec![0; (8 * k) as usize];
            let mut seen_c = [0; 128];
            for lane in 0..32 {
                for i in 0..na as u32 * f.per_reg() {
                    let (r, c) = f.a_coord(lane, i);
                    seen_a[(r * k + c) as usize] += 1;
                }
                for i in 0..nb as u32 * f.per_reg() {
                    let (r, c) = f.b_coord(lane, i);
                    seen_b[(r * 8 + c) as usize] += 1;
                }
                for i in 0..4 {
                    let (r, c) = MmaSyncForm::cd_coord(lane, i);
                    seen_c[(r * 8 + c) as usize] += 1;
                }
            }
            assert!(seen_a.iter().all(|&n| n == 1), "{f:?} A");
            assert!(seen_b.iter().all(|&n| n == 1), "{f:?} B");
            assert!(seen_c.iter().all(|&n| n == 1), "{f:?} C");
        }
        assert!(MmaSyncForm::new(MmaShape::M16N8K16, MmaAb::Bf16, false, false).is_none());
        assert!(MmaSyncForm::new(MmaShape::M16N8K16, MmaAb::Tf32, true, true).is_none());
        assert!(MmaSyncForm::new(MmaShape::M16N8K4, MmaAb::F16, true, true).is_none());
    }
}
