//! CUDA's device `printf`, as `vprintf(format, args)` formats it: the format string's
//! conversions applied to arguments packed in a buffer, each at the next offset aligned to its
//! own size (NVVM packs a call's arguments so, after C's default promotions: `float` becomes
//! `double`, `char` and `short` become `int`).
//!
//! The CUDA C++ Programming Guide ("Formatted Output") defines what is accepted: a conversion
//! `%[flags][width][.precision][size]type` with flags `#`, ` `, `0`, `+`, `-`; width and
//! precision as digits or `*`; size `h`, `hh`, `l`, `ll`; type one of `cdiouxXpeEfgGaAs`; at
//! most 32 arguments, conversions beyond them written as they are. The final formatting is the
//! host C library's; this follows the C standard's (glibc's) rules for each conversion.

/// Where the formatter gets an argument: `arg(offset, bytes)` reads `bytes` little-endian bytes
/// of the argument buffer at `offset`; `string(address)` reads a NUL-terminated string.
pub trait Args {
    fn arg(&mut self, offset: u64, bytes: u32) -> Result<u64, String>;
    fn string(&mut self, address: u64) -> Result<Vec<u8>, String>;
}

/// Arguments a format may consume (CUDA C++ Programming Guide, "Formatted Output: Limitations").
pub const MAX_ARGS: u32 = 32;

/// Format `fmt` with arguments from `a`: the text and the number of arguments consumed (what
/// CUDA's `printf` returns).
pub fn format(fmt: &[u8], a: &mut dyn Args) -> Result<(String, u32), String> {
    let mut out: Vec<u8> = Vec::new();
    let mut off = 0u64;
    let mut used = 0u32;
    let mut i = 0;
    // Read the next argument of `bytes` bytes, aligned to its size.
    fn next(
        a: &mut dyn Args,
        off: &mut u64,
        bytes: u32,
        used: &mut u32,
    ) -> Result<Option<u64>, String> {
        if *used >= MAX_ARGS {
            return Ok(None);
        }
        *off = off.next_multiple_of(bytes as u64);
        let v = a.arg(*off, bytes)?;
        *off += bytes as u64;
        *used += 1;
        Ok(Some(v))
    }
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if fmt.get(i) == Some(&b'%') {
            out.push(b'%');
            i += 1;
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = fmt.get(i) {
            match f {
                b'-' => spec.left = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                b'0' => spec.zero = true,
                _ => break,
            }
            i += 1;
        }
        let mut starved = false;
        if fmt.get(i) == Some(&b'*') {
            i += 1;
            match next(a, &mut off, 4, &mut used)? {
                Some(w) => {
                    let w = w as u32 as i32;
                    if w < 0 {
                        spec.left = true;
                    }
                    spec.width = w.unsigned_abs() as usize;
                }
                None => starved = true,
            }
        } else {
            spec.width = digits(fmt, &mut i);
        }
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                i += 1;
                match next(a, &mut off, 4, &mut used)? {
                    Some(p) => {
                        let p = p as u32 as i32;
                        spec.prec = (p >= 0).then_some(p as usize);
                    }
                    None => starved = true,
                }
            } else {
                spec.prec = Some(digits(fmt, &mut i));
            }
        }
        let mut size = 0i32; // -2 hh, -1 h, 0 none, 1 l, 2 ll
        while let Some(&z) = fmt.get(i) {
            match z {
                b'h' => size -= 1,
                b'l' | b'L' | b'j' | b'z' | b't' => size += if z == b'l' { 1 } else { 2 },
                _ => break,
            }
            i += 1;
        }
        let Some(&ty) = fmt.get(i) else {
            // A lone `%...` at the end: written as it is.
            out.extend_from_slice(&fmt[start..]);
            break;
        };
        i += 1;
        let bytes = match ty {
            b'd' | b'i' | b'u' | b'o' | b'x' | b'X' | b'c' => {
                if size >= 1 {
                    8
                } else {
                    4
                }
            }
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' | b's' | b'p' => 8,
            _ => {
                // Not a conversion: written as it is (glibc does the same).
                out.extend_from_slice(&fmt[start..i]);
                continue;
            }
        };
        let v = if starved {
            None
        } else {
            next(a, &mut off, bytes, &mut used)?
        };
        let Some(v) = v else {
            // Past the 32 arguments CUDA passes: the conversion is written as it is.
            out.extend_from_slice(&fmt[start..i]);
            continue;
        };
        let text = match ty {
            b'd' | b'i' => {
                let n: i64 = match size {
                    ..=-2 => v as i8 as i64,
                    -1 => v as i16 as i64,
                    0 => v as u32 as i32 as i64,
                    _ => v as i64,
                };
                spec.integer(n < 0, n.unsigned_abs(), 10, false, true)
            }
            b'u' | b'o' | b'x' | b'X' => {
                let n: u64 = match size {
                    ..=-2 => v as u8 as u64,
                    -1 => v as u16 as u64,
                    0 => v as u32 as u64,
                    _ => v,
                };
                let base = match ty {
                    b'o' => 8,
                    b'u' => 10,
                    _ => 16,
                };
                spec.integer(false, n, base, ty == b'X', false)
            }
            b'c' => spec.pad(vec![v as u8], false),
            b's' => {
                let mut s = if v == 0 {
                    b"(null)".to_vec()
                } else {
                    a.string(v)?
                };
                if let Some(p) = spec.prec {
                    s.truncate(p);
                }
                spec.pad(s, false)
            }
            b'p' => {
                if v == 0 {
                    spec.pad(b"(nil)".to_vec(), false)
                } else {
                    spec.alt = true;
                    spec.integer(false, v, 16, false, false)
                }
            }
            _ => spec.float(f64::from_bits(v), ty),
        };
        out.extend_from_slice(&text);
    }
    Ok((String::from_utf8_lossy(&out).into_owned(), used))
}

fn digits(fmt: &[u8], i: &mut usize) -> usize {
    let mut n = 0usize;
    while let Some(&d) = fmt.get(*i) {
        if !d.is_ascii_digit() {
            break;
        }
        n = n.saturating_mul(10).saturating_add((d - b'0') as usize);
        *i += 1;
    }
    n.min(1 << 20)
}

#[derive(Default)]
struct Spec {
    left: bool,
    plus: bool,
    space: bool,
    alt: bool,
    zero: bool,
    width: usize,
    prec: Option<usize>,
}

impl Spec {
    /// `body` padded to the width: spaces on the left (or right with `-`), or zeros after the
    /// sign and prefix (`sign_len` bytes of `body`) with `0` when `zero_ok`.
    fn pad_at(&self, body: Vec<u8>, zero_ok: bool, sign_len: usize) -> Vec<u8> {
        if body.len() >= self.width {
            return body;
        }
        let fill = self.width - body.len();
        if self.left {
            let mut b = body;
            b.extend(std::iter::repeat_n(b' ', fill));
            b
        } else if self.zero && zero_ok {
            let mut b = body[..sign_len].to_vec();
            b.extend(std::iter::repeat_n(b'0', fill));
            b.extend_from_slice(&body[sign_len..]);
            b
        } else {
            let mut b = vec![b' '; fill];
            b.extend(body);
            b
        }
    }

    fn pad(&self, body: Vec<u8>, zero_ok: bool) -> Vec<u8> {
        self.pad_at(body, zero_ok, 0)
    }

    fn sign(&self, neg: bool) -> &'static [u8] {
        if neg {
            b"-"
        } else if self.plus {
            b"+"
        } else if self.space {
            b" "
        } else {
            b""
        }
    }

    /// An integer conversion (C11 7.21.6.1): at least `prec` digits (none for a zero with
    /// precision 0), `#` adds `0x`/`0X` to a non-zero hex value and makes an octal value start
    /// with 0; `0` pads with zeros unless a precision is given.
    fn integer(&self, neg: bool, n: u64, base: u32, upper: bool, signed: bool) -> Vec<u8> {
        let mut d = match base {
            8 => format!("{n:o}"),
            16 if upper => format!("{n:X}"),
            16 => format!("{n:x}"),
            _ => format!("{n}"),
        }
        .into_bytes();
        if self.prec == Some(0) && n == 0 {
            d.clear();
        }
        if let Some(p) = self.prec {
            if d.len() < p {
                let mut z = vec![b'0'; p - d.len()];
                z.extend(d);
                d = z;
            }
        }
        let mut prefix: Vec<u8> = if signed {
            self.sign(neg).to_vec()
        } else {
            Vec::new()
        };
        if self.alt {
            match base {
                16 if n != 0 => prefix.extend_from_slice(if upper { b"0X" } else { b"0x" }),
                8 if d.first() != Some(&b'0') => d.insert(0, b'0'),
                _ => {}
            }
        }
        let plen = prefix.len();
        prefix.extend(d);
        self.pad_at(prefix, self.prec.is_none(), plen)
    }

    /// `%f %e %g %a` and upper-case forms (C11 7.21.6.1), as glibc prints them: `inf`, `nan`
    /// (with the sign), exponents of at least two digits.
    fn float(&self, x: f64, ty: u8) -> Vec<u8> {
        let upper = ty.is_ascii_uppercase();
        let neg = x.is_sign_negative();
        let sign = self.sign(neg);
        let a = x.abs();
        let body = if x.is_nan() {
            "nan".to_string()
        } else if x.is_infinite() {
            "inf".to_string()
        } else {
            let p = self.prec.unwrap_or(6);
            match ty.to_ascii_lowercase() {
                b'f' => fixed(a, p, self.alt),
                b'e' => exp(a, p, self.alt),
                b'a' => hexfloat(a, self.prec, self.alt),
                _ => general(a, p, self.alt),
            }
        };
        let body = if upper {
            body.to_ascii_uppercase()
        } else {
            body
        };
        let finite = x.is_finite();
        let mut b = sign.to_vec();
        b.extend(body.into_bytes());
        self.pad_at(b, finite, sign.len())
    }
}

/// `%.pf` of a non-negative finite value: Rust's formatting of floats is exact and rounds the
/// exact binary value half to even, as glibc does.
fn fixed(a: f64, p: usize, alt: bool) -> String {
    let mut s = format!("{a:.p$}");
    if alt && p == 0 {
        s.push('.');
    }
    s
}

/// `%.pe`: mantissa, `e`, the exponent's sign and at least two digits.
fn exp(a: f64, p: usize, alt: bool) -> String {
    let s = format!("{a:.p$e}");
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let mut m = m.to_string();
    if alt && p == 0 {
        m.push('.');
    }
    format!(
        "{m}e{}{:02}",
        if e < 0 { '-' } else { '+' },
        e.unsigned_abs()
    )
}

/// `%.pg`: with P = p (1 if 0) and X the exponent `%e` would print, `%f` with precision
/// P - 1 - X when P > X >= -4, else `%e` with precision P - 1; trailing zeros (and a trailing
/// point) removed unless `#`.
fn general(a: f64, p: usize, alt: bool) -> String {
    let p = p.max(1);
    let e = if a == 0.0 {
        0
    } else {
        let s = format!("{a:.prec$e}", prec = p - 1);
        s.split_once('e')
            .and_then(|(_, e)| e.parse::<i64>().ok())
            .unwrap_or(0)
    };
    let mut s = if (p as i64) > e && e >= -4 {
        fixed(a, (p as i64 - 1 - e) as usize, alt)
    } else {
        exp(a, p - 1, alt)
    };
    if !alt {
        let (m, tail) = match s.find('e') {
            Some(k) => (s[..k].to_string(), s[k..].to_string()),
            None => (s.clone(), String::new()),
        };
        let m = if m.contains('.') {
            m.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            m
        };
        s = m + &tail;
    }
    s
}

/// `%a`: `0x1.hhhp+d` (normal) or `0x0.hhhp-1022` (subnormal), all significant hex digits
/// without a precision, else rounded half to even to `prec` digits.
fn hexfloat(a: f64, prec: Option<usize>, alt: bool) -> String {
    if a == 0.0 {
        let digits = prec.unwrap_or(0);
        let frac = "0".repeat(digits);
        let point = if digits > 0 || alt { "." } else { "" };
        return format!("0x0{point}{frac}p+0");
    }
    let bits = a.to_bits();
    let exp_bits = ((bits >> 52) & 0x7FF) as i64;
    let mut mant = bits & ((1u64 << 52) - 1);
    let (mut lead, e) = if exp_bits == 0 {
        (0u64, -1022)
    } else {
        (1u64, exp_bits - 1023)
    };
    let mut ndig = 13usize;
    if let Some(p) = prec {
        if p < 13 {
            let drop = 4 * (13 - p) as u32;
            let full = (lead << 52) | mant;
            let rem = full & ((1u64 << drop) - 1);
            let mut kept = full >> drop;
            let half = 1u64 << (drop - 1);
            if rem > half || (rem == half && kept & 1 == 1) {
                kept += 1;
            }
            lead = kept >> (4 * p as u32);
            mant = (kept & ((1u64 << (4 * p as u32)) - 1)) << drop;
        }
        ndig = p;
    }
    let mut frac = format!("{mant:013x}");
    if prec.is_none() {
        frac = frac.trim_end_matches('0').to_string();
    } else if ndig <= 13 {
        frac.truncate(ndig);
    } else {
        frac.push_str(&"0".repeat(ndig - 13));
    }
    let point = if !frac.is_empty() || alt { "." } else { "" };
    format!(
        "0x{lead}{point}{frac}p{}{}",
        if e < 0 { '-' } else { '+' },
        e.unsigned_abs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arguments packed as NVVM packs them: each at the next offset aligned to its size.
    struct Buf(Vec<u8>, Vec<(u64, Vec<u8>)>);
    impl Args for Buf {
        fn arg(&mut self, o: u64, n: u32) -> Result<u64, String> {
            let o = o as usize;
            let mut b = [0u8; 8];
            b[..n as usize].copy_from_slice(&self.0[o..o + n as usize]);
            Ok(u64::from_le_bytes(b))
        }
        fn string(&mut self, a: u64) -> Result<Vec<u8>, String> {
            Ok(self
                .1
                .iter()
                .find(|s| s.0 == a)
                .map(|s| s.1.clone())
                .unwrap_or_default())
        }
    }
    fn pack(args: &[(u64, u32)]) -> Vec<u8> {
        let mut v = Vec::new();
        for &(x, n) in args {
            while v.len() % n as usize != 0 {
                v.push(0xEE);
            }
            v.extend_from_slice(&x.to_le_bytes()[..n as usize]);
        }
        v
    }
    fn f(fmt: &str, args: &[(u64, u32)]) -> String {
        let mut b = Buf(pack(args), vec![(0x1000, b"hello".to_vec())]);
        format(fmt.as_bytes(), &mut b).unwrap().0
    }
    fn d(x: f64) -> (u64, u32) {
        (x.to_bits(), 8)
    }

    #[test]
    fn integers_as_c_prints_them() {
        assert_eq!(
            f(
                "%d|%i|%u",
                &[(-5i32 as u32 as u64, 4), (7, 4), (u32::MAX as u64, 4)]
            ),
            "-5|7|4294967295"
        );
        assert_eq!(
            f(
                "[%5d][%-5d][%05d][%+d][% d]",
                &[(42, 4), (42, 4), (-42i32 as u32 as u64, 4), (3, 4), (3, 4)]
            ),
            "[   42][42   ][-0042][+3][ 3]"
        );
        assert_eq!(
            f(
                "%x %X %#x %#o %o",
                &[(255, 4), (255, 4), (255, 4), (8, 4), (0, 4)]
            ),
            "ff FF 0xff 010 0"
        );
        assert_eq!(
            f("%.3d|%.0d|%8.3x", &[(7, 4), (0, 4), (10, 4)]),
            "007||     00a"
        );
        assert_eq!(
            f(
                "%lld %llu %ld",
                &[(-1i64 as u64, 8), (u64::MAX, 8), (1 << 40, 8)]
            ),
            "-1 18446744073709551615 1099511627776"
        );
        assert_eq!(f("%hd %hhu", &[(0x12345, 4), (0x1FF, 4)]), "9029 255");
        assert_eq!(f("%c%c", &[(b'h' as u64, 4), (b'i' as u64, 4)]), "hi");
        // An int then a 64-bit value: the second is aligned to 8 (padding skipped).
        assert_eq!(f("%d %lld", &[(1, 4), (2, 8)]), "1 2");
    }

    #[test]
    fn floats_as_glibc_prints_them() {
        assert_eq!(f("%f", &[d(1.5)]), "1.500000");
        assert_eq!(
            f(
                "%.2f|%8.3f|%-8.1f|%08.2f",
                &[d(2.675), d(-1.0), d(0.25), d(-3.5)]
            ),
            "2.67|  -1.000|0.2     |-0003.50"
        );
        assert_eq!(
            f("%e|%.3E|%.0e", &[d(12345.678), d(0.000123), d(5e10)]),
            "1.234568e+04|1.230E-04|5e+10"
        );
        assert_eq!(
            f(
                "%g|%g|%g|%g|%G",
                &[d(100000.0), d(1000000.0), d(0.0001), d(1e-5), d(2.5e-7)]
            ),
            "100000|1e+06|0.0001|1e-05|2.5E-07"
        );
        assert_eq!(
            f("%g|%.3g|%#g|%g", &[d(1.23456), d(1.23456), d(2.0), d(0.0)]),
            "1.23456|1.23|2.00000|0"
        );
        assert_eq!(
            f(
                "%f|%F|%e|%f",
                &[d(f64::INFINITY), d(f64::NAN), d(f64::NEG_INFINITY), d(-0.0)]
            ),
            "inf|NAN|-inf|-0.000000"
        );
        assert_eq!(
            f("%a|%.1a|%A", &[d(1.0), d(1.75), d(-0.5)]),
            "0x1p+0|0x1.cp+0|-0X1P-1"
        );
    }

    #[test]
    fn strings_pointers_and_literals() {
        assert_eq!(
            f(
                "%s|%.3s|%8s|%s",
                &[(0x1000, 8), (0x1000, 8), (0x1000, 8), (0, 8)]
            ),
            "hello|hel|   hello|(null)"
        );
        assert_eq!(f("%p|%p", &[(0x7f00, 8), (0, 8)]), "0x7f00|(nil)");
        assert_eq!(f("100%% %y %", &[]), "100% %y %");
        assert_eq!(
            f(
                "[%*d][%-*d][%.*f]",
                &[(4, 4), (7, 4), (3, 4), (8, 4), (2, 4), d(1.0)]
            ),
            "[   7][8  ][1.00]"
        );
    }

    #[test]
    fn at_most_32_arguments_then_conversions_as_written() {
        let fmt = "%d".repeat(33);
        let args: Vec<(u64, u32)> = (0..33).map(|i| (i % 10, 4)).collect();
        let mut b = Buf(pack(&args), Vec::new());
        let (s, n) = format(fmt.as_bytes(), &mut b).unwrap();
        assert_eq!(n, 32);
        assert_eq!(s, "01234567890123456789012345678901%d");
    }
}
