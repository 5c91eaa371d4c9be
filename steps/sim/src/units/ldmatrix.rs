//! `ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16` and its inverse `stmatrix` (PTX ISA
//! 9.7.14.5.15 "ldmatrix" and 9.7.14.5.16 "stmatrix"): a warp moves up to four 8 x 8 matrices
//! of 16-bit elements between shared memory and registers. Row `r` of matrix `j` lives at the
//! 16-byte-aligned address held by lane `8j + r` ("threads 0-7 for the first matrix, 8-15 for
//! the second, ..."); every lane's register `j` holds two elements of matrix `j`, laid out as
//! the ISA's "fragment layout" figure: lane `l` holds row `l / 4`, columns `2 (l % 4)` and
//! `2 (l % 4) + 1` (low half first). With `.trans` the matrix is transposed on the way: lane `l`
//! holds column `l / 4` of rows `2 (l % 4)` and `2 (l % 4) + 1`.

/// The lane whose address names row `row` of matrix `matrix`.
pub fn row_lane(matrix: u32, row: u32) -> u32 {
    8 * matrix + row
}

/// The (row, column) in the stored matrix of the two elements (low half, high half) of a
/// lane's register.
pub fn element_coords(lane: u32, trans: bool) -> [(u32, u32); 2] {
    let (a, b) = (lane / 4, 2 * (lane % 4));
    if trans {
        [(b, a), (b + 1, a)]
    } else {
        [(a, b), (a, b + 1)]
    }
}

/// `ldmatrix`: `rows[8j + r]` is row r of matrix j (8 elements); returns each lane's registers
/// (`rows.len() / 8` of them).
pub fn load(rows: &[[u16; 8]], trans: bool) -> Vec<Vec<u32>> {
    let num = rows.len() / 8;
    (0..32u32)
        .map(|lane| {
            (0..num)
                .map(|j| {
                    let [(r0, c0), (r1, c1)] = element_coords(lane, trans);
                    let lo = rows[8 * j + r0 as usize][c0 as usize];
                    let hi = rows[8 * j + r1 as usize][c1 as usize];
                    u32::from(lo) | (u32::from(hi) << 16)
                })
                .collect()
        })
        .collect()
}

/// `stmatrix`: `regs[lane]` are each lane's registers; returns the rows to store (`8 * num`).
pub fn store(regs: &[Vec<u32>], trans: bool) -> Vec<[u16; 8]> {
    let num = regs.first().map_or(0, Vec::len);
    let mut rows = vec![[0u16; 8]; 8 * num];
    for (lane, r) in regs.iter().enumerate() {
        for (j, &v) in r.iter().enumerate() {
            let [(r0, c0), (r1, c1)] = element_coords(lane as u32, trans);
            rows[8 * j + r0 as usize][c0 as usize] = v as u16;
            rows[8 * j + r1 as usize][c1 as usize] = (v >> 16) as u16;
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_inverts_load_and_trans_transposes() {
        let rows: Vec<[u16; 8]> = (0..32u16)
            .map(|r| std::array::from_fn(|c| r * 8 + c as u16))
            .collect();
        for trans in [false, true] {
            let regs = load(&rows, trans);
            assert_eq!(store(&regs, trans), rows);
        }
        let plain = load(&rows[..8], false);
        let t = load(&rows[..8], true);
        // Lane 5: row 1, columns 2 and 3; transposed, column 1 of rows 2 and 3.
        assert_eq!(plain[5][0], (8 + 2) | ((8 + 3) << 16));
        assert_eq!(t[5][0], (2 * 8 + 1) | ((3 * 8 + 1) << 16));
    }
}
