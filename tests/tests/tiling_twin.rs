//! Step 6's `tile_coords` exists three times: in the Blackwell kernel, in its Hopper twin and as
//! `common::model::tiling::tile_coords` (used to test the order and draw it in the book). This test
//! compiles each kernel's own function text with the host C++ compiler and checks that it gives
//! the host twin's order, so the three cannot drift.

use common::model::tiling::{tile_coords, MinorDim};
use common::step::Arch;
use workbook_tests::run_host_cpp;

/// The text of `tile_coords` in step 6's `arch` kernel, from its signature to its closing brace.
fn device_function(arch: Arch) -> String {
    let src = ladder::get(6).expect("step 6").info().kernel(arch).text;
    let start = src
        .find("__device__ __forceinline__ void tile_coords(")
        .expect("step 6's kernel defines tile_coords");
    let len = src[start..]
        .find("\n}\n")
        .expect("tile_coords ends with a closing brace")
        + 3;
    src[start..start + len].to_string()
}

#[test]
fn both_kernels_and_the_host_twin_visit_tiles_in_the_same_order() {
    for arch in Arch::ALL {
        same_order_as_the_host_twin(arch);
    }
}

fn same_order_as_the_host_twin(arch: Arch) {
    let program = format!(
        r#"#include <algorithm>
#include <cstdio>
using std::min;
#define __device__
#define __forceinline__ inline
static int GRID_TILE_WIDTH, GRID_MINOR_DIM;
{}
int main() {{
  for (GRID_MINOR_DIM = 0; GRID_MINOR_DIM < 2; ++GRID_MINOR_DIM)
    for (GRID_TILE_WIDTH = 1; GRID_TILE_WIDTH <= 9; ++GRID_TILE_WIDTH)
      for (int tm = 1; tm <= 11; ++tm)
        for (int tn = 1; tn <= 11; ++tn)
          for (int t = 0; t < tm * tn; ++t) {{
            int m, n;
            tile_coords(t, tm, tn, m, n);
            std::printf("%d %d %d %d %d %d %d\n", GRID_MINOR_DIM, GRID_TILE_WIDTH, tm, tn, t, m, n);
          }}
}}
"#,
        device_function(arch)
    );
    let text = run_host_cpp(&format!("tiling-twin-{arch}"), &program);
    let mut lines = 0;
    for line in text.lines() {
        let v: Vec<usize> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        let minor = if v[0] == 0 { MinorDim::M } else { MinorDim::N };
        let host = tile_coords(v[4], v[2], v[3], v[1], minor);
        assert_eq!(
            host,
            (v[5], v[6]),
            "{arch} kernel: minor {:?}, width {}, grid {}x{}, tile {}",
            minor,
            v[1],
            v[2],
            v[3],
            v[4]
        );
        lines += 1;
    }
    // 2 minor dims x 9 widths x sum over 11x11 grids of tm*tn tiles.
    assert_eq!(lines, 2 * 9 * 66 * 66);
}
