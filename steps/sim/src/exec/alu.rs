//! The interpreter's side of [`crate::alu`]: read the operands, evaluate, write the results.

use super::{mask, Machine};
use crate::alu::{self, Alu, WarpAlu};
use crate::decode::Opd;

impl Machine<'_> {
    /// One [`Alu`] instruction of thread `t` (operands `a`, destination first).
    pub(super) fn exec_alu(&mut self, t: u32, x: &Alu, a: &[Opd]) {
        let mut src = [0u64; 4];
        let n = a.len() - 1;
        for (i, o) in a[1..].iter().enumerate() {
            src[i] = self.rv(t, o);
        }
        let mut cc = self.threads[t as usize].cc;
        let (d, q) = x.eval(&src[..n], &mut cc);
        if x.uses_carry() {
            self.threads[t as usize].cc = cc;
        }
        match &a[0] {
            Opd::Pair(p, r) => {
                let (p, r) = (p.as_ref().clone(), r.as_ref().clone());
                self.wr(t, &p, d);
                self.wr(t, &r, q);
            }
            o => self.wr(t, o, d),
        }
    }

    /// `redux.sync` / `match.sync` over `lanes` (all at the rendezvous, in lane order).
    pub(super) fn exec_warp_alu(&mut self, lanes: &[u32], w: &WarpAlu, a: &[Opd]) {
        let vals: Vec<u64> = lanes.iter().map(|&x| self.rv(x, &a[1])).collect();
        let bits: Vec<u32> = lanes
            .iter()
            .map(|&x| self.threads[x as usize].lane)
            .collect();
        match w {
            WarpAlu::Redux { op, ty, abs, nan } => {
                let r = alu::redux(*op, *ty, *abs, *nan, &vals);
                for &x in lanes {
                    self.wr(x, &a[0], r);
                }
            }
            WarpAlu::MatchAny(ty) | WarpAlu::MatchAll(ty) => {
                let width = ty.bits();
                let v: Vec<u64> = vals.iter().map(|&v| mask(v, width)).collect();
                let all_same = v.iter().all(|&y| y == v[0]);
                let full: u32 = bits.iter().fold(0, |m, &l| m | (1 << l));
                for (i, &x) in lanes.iter().enumerate() {
                    // match.any: the lanes holding this lane's value; match.all: every lane
                    // of the mask when all hold the same value, else 0 (and p false).
                    let (d, p) = match w {
                        WarpAlu::MatchAny(_) => (
                            bits.iter()
                                .zip(&v)
                                .filter(|(_, &y)| y == v[i])
                                .fold(0u32, |m, (&l, _)| m | (1 << l)),
                            true,
                        ),
                        _ => (if all_same { full } else { 0 }, all_same),
                    };
                    match &a[0] {
                        Opd::Pair(dd, pp) => {
                            let (dd, pp) = (dd.as_ref().clone(), pp.as_ref().clone());
                            self.wr(x, &dd, d as u64);
                            self.wr(x, &pp, p as u64);
                        }
                        o => {
                            let o = o.clone();
                            self.wr(x, &o, d as u64)
                        }
                    }
                }
            }
        }
    }
}
