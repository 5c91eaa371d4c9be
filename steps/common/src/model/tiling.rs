//! The visiting order of step 6's persistent loop: the host twin of `tile_coords` in
//! `steps/step6_grid_tiling/src/kernel.cu`, used to test the order and to draw it.

/// The dimension bands are cut across (`grid_minor_dim` in step 6's config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinorDim {
    M = 0,
    N = 1,
}

/// The `tile`-th tile (tile_m, tile_n) of a `tiles_m` x `tiles_n` grid visited as a planar snake
/// over bands `width` tiles wide along `minor`, every other band reversed. Mirrors the kernel.
pub fn tile_coords(
    tile: usize,
    tiles_m: usize,
    tiles_n: usize,
    width: usize,
    minor: MinorDim,
) -> (usize, usize) {
    let (minor_count, major_count) = match minor {
        MinorDim::M => (tiles_m, tiles_n),
        MinorDim::N => (tiles_n, tiles_m),
    };
    let band = tile / (width * major_count);
    let band_width = width.min(minor_count - band * width);
    let in_band = tile - band * width * major_count;
    let along = in_band / band_width;
    let major = if band.is_multiple_of(2) {
        along
    } else {
        major_count - 1 - along
    };
    let minor_idx = band * width + in_band % band_width;
    match minor {
        MinorDim::M => (minor_idx, major),
        MinorDim::N => (major, minor_idx),
    }
}

/// The visiting order as a grid: `order[m][n]` = when tile (m, n) is visited.
pub fn visit_order(
    tiles_m: usize,
    tiles_n: usize,
    width: usize,
    minor: MinorDim,
) -> Vec<Vec<usize>> {
    let mut order = vec![vec![usize::MAX; tiles_n]; tiles_m];
    for t in 0..tiles_m * tiles_n {
        let (m, n) = tile_coords(t, tiles_m, tiles_n, width, minor);
        order[m][n] = t;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn band_of(tile: (usize, usize), width: usize, minor: MinorDim) -> usize {
        match minor {
            MinorDim::M => tile.0 / width,
            MinorDim::N => tile.1 / width,
        }
    }

    #[test]
    fn the_order_is_a_bijection_onto_the_tile_grid() {
        for tiles_m in 1..=13 {
            for tiles_n in 1..=13 {
                for width in 1..=15 {
                    for minor in [MinorDim::M, MinorDim::N] {
                        let mut seen = vec![false; tiles_m * tiles_n];
                        for t in 0..tiles_m * tiles_n {
                            let (m, n) = tile_coords(t, tiles_m, tiles_n, width, minor);
                            assert!(
                                m < tiles_m && n < tiles_n,
                                "{tiles_m}x{tiles_n} w{width} {minor:?}: tile {t} -> ({m},{n})"
                            );
                            assert!(
                                !seen[m * tiles_n + n],
                                "{tiles_m}x{tiles_n} w{width} {minor:?}: ({m},{n}) twice"
                            );
                            seen[m * tiles_n + n] = true;
                        }
                    }
                }
            }
        }
        // The default problem on the default config: 16 x 32 cluster tiles, bands of 8 along N.
        let order = visit_order(16, 32, 8, MinorDim::N);
        assert!(order.iter().flatten().all(|&t| t < 16 * 32));
    }

    #[test]
    fn consecutive_tiles_share_an_operand_band() {
        // Either both lie in the same band (so they use the same few blocks of the operand cut
        // into bands), or the snake turned: same major index, so the same block of the other one.
        for (tiles_m, tiles_n) in [(16, 32), (7, 9), (1, 5), (12, 3), (32, 16)] {
            for width in [1, 2, 3, 8, 16] {
                for minor in [MinorDim::M, MinorDim::N] {
                    for t in 1..tiles_m * tiles_n {
                        let a = tile_coords(t - 1, tiles_m, tiles_n, width, minor);
                        let b = tile_coords(t, tiles_m, tiles_n, width, minor);
                        let same_band = band_of(a, width, minor) == band_of(b, width, minor);
                        let same_major = match minor {
                            MinorDim::M => a.1 == b.1,
                            MinorDim::N => a.0 == b.0,
                        };
                        assert!(
                            same_band || same_major,
                            "{tiles_m}x{tiles_n} w{width} {minor:?}: {a:?} -> {b:?}"
                        );
                        if same_band {
                            // Inside a band the major index moves by at most one step at a time.
                            let (ma, mb) = match minor {
                                MinorDim::M => (a.1, b.1),
                                MinorDim::N => (a.0, b.0),
                            };
                            assert!(ma.abs_diff(mb) <= 1, "{a:?} -> {b:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_example_reads_as_a_snake() {
        // 3 x 4 tiles, bands of 2 columns (minor = N): band 0 walks down, band 1 walks up.
        let order = visit_order(3, 4, 2, MinorDim::N);
        assert_eq!(
            order,
            vec![vec![0, 1, 10, 11], vec![2, 3, 8, 9], vec![4, 5, 6, 7]]
        );
    }
}
