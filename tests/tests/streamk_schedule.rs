//! Step 7's Hopper twin (`steps/step7_last_wave/src/kernel_sm90.cu`, also the bench contender
//! 6-streamk) decides on the GPU,
//! from the launch alone, whether to split the last, partial wave of tiles over every cluster
//! (`split_tail`) and which k-blocks of which tiles each cluster then computes (`work_item`).
//! These tests compile the kernel's own text of that schedule (its `ANCHOR: schedule` block)
//! with the host C++ compiler, so what is checked is what runs:
//! - the decision, as a table: split only where it saves more k-blocks than the fix-up costs;
//! - the schedule, over many launches: every k-block of every tile computed exactly once, whole
//!   tiles in step 6's order, one owner per tile whose helper list is exactly the clusters that
//!   computed its other pieces, at most one workspace slot per cluster, and no owner waiting
//!   before its own helper piece is written (so the flags cannot deadlock).

use std::collections::{BTreeMap, BTreeSet};
use workbook_tests::run_host_cpp;

const KERNEL: &str = "steps/step7_last_wave/src/kernel_sm90.cu";

/// A launch: (tiles, clusters, k-blocks).
type Launch = (i64, i64, i64);

/// The kernel's schedule block, between `// ANCHOR: schedule` and `// ANCHOR_END: schedule`.
fn schedule_text() -> String {
    schedule_text_of(KERNEL)
}

fn schedule_text_of(kernel: &str) -> String {
    let path = format!("{}/../{kernel}", env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(&path).expect("the contender kernel is in the repository");
    let start = src
        .find("// ANCHOR: schedule")
        .expect("the kernel marks its schedule block");
    let end = src[start..]
        .find("// ANCHOR_END: schedule")
        .expect("the schedule block ends")
        + start;
    src[start..end].to_string()
}

/// The kernel's fix-up cost, as it states it.
fn fixup_k_blocks(schedule: &str) -> i64 {
    let line = schedule
        .lines()
        .find(|l| l.starts_with("constexpr int FIXUP_K_BLOCKS = "))
        .expect("the schedule states FIXUP_K_BLOCKS");
    line.trim_start_matches("constexpr int FIXUP_K_BLOCKS = ")
        .trim_end_matches(';')
        .parse()
        .expect("a number")
}

/// A host program made of the schedule block and `main_body`.
fn program(schedule: &str, main_body: &str) -> String {
    format!(
        "#include <algorithm>\n#include <cstdio>\nusing std::max;\nusing std::min;\n\
         #define __device__\n#define __forceinline__ inline\n{schedule}\nint main() {{\n{main_body}\n}}\n"
    )
}

/// `split_tail` for each (tiles, clusters, k-blocks), run on the host.
fn decisions(schedule: &str, name: &str, cases: &[Launch]) -> Vec<bool> {
    let calls: String = cases
        .iter()
        .map(|(t, c, k)| format!("  std::printf(\"%d\\n\", split_tail({t}, {c}, {k}) ? 1 : 0);\n"))
        .collect();
    let out = run_host_cpp(name, &program(schedule, &calls));
    out.lines().map(|l| l == "1").collect()
}

#[test]
fn the_tail_is_split_only_where_it_saves_more_than_the_fixup_costs() {
    let schedule = schedule_text();
    let fixup = fixup_k_blocks(&schedule);
    assert_eq!(
        fixup, 24,
        "the table below is written for the measured cost"
    );
    assert!(
        schedule.contains("constexpr int MIN_SAVED_PART = 5;"),
        "the table below is written for a split that saves at least a fifth of a tile"
    );
    // (tiles, clusters, k-blocks, split?, why). 66 clusters: an H100's or H200's 132 SMs.
    let table: &[(i64, i64, i64, bool, &str)] = &[
        (
            512,
            66,
            64,
            false,
            "4096x8192x4096: 50 tail tiles, 49 of 64 k-blocks, saves 15",
        ),
        (
            1024,
            66,
            128,
            true,
            "8192^3: 34 tail tiles, 66 of 128 k-blocks, saves 62",
        ),
        (
            1024,
            66,
            64,
            true,
            "8192x8192x4096: 34 tail tiles, 33 of 64, saves 31",
        ),
        (
            512,
            66,
            128,
            true,
            "4096x8192x8192: 50 tail tiles, 97 of 128, saves 31",
        ),
        (
            256,
            66,
            256,
            false,
            "4096x4096x16384: 58 tail tiles, 225 of 256, saves 31, under a fifth (measured -5.5 %)",
        ),
        (
            576,
            66,
            96,
            true,
            "6144^3: 48 tail tiles, 70 of 96, saves 26, over a fifth (measured +0.7 %)",
        ),
        (
            273,
            66,
            45,
            true,
            "3328x5376x2880: 9 tail tiles, 7 of 45, saves 38 (measured +4.5 %)",
        ),
        (462, 66, 64, false, "7 whole waves: no tail"),
        (66, 66, 128, false, "one whole wave"),
        (
            67,
            66,
            25,
            false,
            "one tail tile: 1 of 25 k-blocks, saves 24 = the fix-up",
        ),
        (
            67,
            66,
            26,
            true,
            "one tail tile: 1 of 26 k-blocks, saves 25 > the fix-up",
        ),
        (
            65,
            66,
            128,
            false,
            "fewer tiles than clusters (the host launches one per tile)",
        ),
        (
            132,
            67,
            128,
            false,
            "67 clusters: more than the workspace's 66 slots",
        ),
        (67, 66, 500_000, false, "66 x 66 x k-blocks past 32 bits"),
        (67, 66, 400_000, true, "66 x 66 x k-blocks within 32 bits"),
        (
            15,
            7,
            64,
            true,
            "768x1280x4096 on 7 clusters: 1 tail tile, 10 of 64",
        ),
        (
            15,
            4,
            64,
            false,
            "768x1280x4096 on 4 clusters: 3 tail tiles, 48 of 64, saves 16",
        ),
        (
            99,
            8,
            128,
            true,
            "2304x2816x8192 on 8 clusters: 3 tail tiles, 48 of 128",
        ),
        (
            99,
            4,
            11,
            false,
            "2304x2816x704 on 4 clusters: 11 k-blocks a tile, never worth it",
        ),
    ];
    let cases: Vec<Launch> = table.iter().map(|&(t, c, k, _, _)| (t, c, k)).collect();
    let got = decisions(&schedule, "streamk-decision", &cases);
    assert_eq!(got.len(), table.len());
    for (&(t, c, k, want, why), split) in table.iter().zip(got) {
        assert_eq!(split, want, "split_tail({t}, {c}, {k}): {why}");
    }
}

/// One item of a cluster's list, as the kernel's `work_item` gives it.
#[derive(Debug, Clone, Copy)]
struct Item {
    tile: i64,
    kb_begin: i64,
    kb_end: i64,
    first_helper: i64,
    last_helper: i64,
    units: i64,
}

/// Per launch: whether the tail is split, and every cluster's items.
type Schedules = BTreeMap<Launch, (bool, Vec<Vec<Item>>)>;

/// Every cluster's items for each launch, from the kernel's `work_item` run on the host, with
/// FIXUP_K_BLOCKS replaced by `fixup` (0: split every tail that shortens the last wave at all,
/// the least part of a tile lifted too).
fn schedules(fixup: i64, launches: &[Launch]) -> Schedules {
    let schedule = schedule_text();
    let stated = format!(
        "constexpr int FIXUP_K_BLOCKS = {};",
        fixup_k_blocks(&schedule)
    );
    let mut schedule =
        schedule.replace(&stated, &format!("constexpr int FIXUP_K_BLOCKS = {fixup};"));
    if fixup == 0 {
        // Every split that shortens the last wave at all: no least part of a tile either.
        schedule = schedule.replace(
            "constexpr int MIN_SAVED_PART = 5;",
            "constexpr int MIN_SAVED_PART = 1 << 30;",
        );
    }
    let list: String = launches
        .iter()
        .map(|(t, c, k)| format!("{{{t}, {c}, {k}}},"))
        .collect();
    let body = format!(
        "  const int launches[][3] = {{{list}}};\n\
         for (const auto& l : launches) {{\n\
           std::printf(\"L %d %d %d %d\\n\", l[0], l[1], l[2], split_tail(l[0], l[1], l[2]) ? 1 : 0);\n\
           for (int c = 0; c < l[1]; ++c) {{\n\
             Work w;\n\
             for (int i = 0; work_item(i, c, l[1], l[0], l[2], w); ++i)\n\
               std::printf(\"%d %d %d %d %d %d %d\\n\", c, w.tile, w.kb_begin, w.kb_end,\n\
                           w.first_helper, w.last_helper, w.units);\n\
           }}\n\
         }}"
    );
    let out = run_host_cpp(
        &format!("streamk-schedule-{fixup}"),
        &program(&schedule, &body),
    );
    let mut result = BTreeMap::new();
    let mut current: Option<Launch> = None;
    for line in out.lines() {
        let v: Vec<i64> = line
            .trim_start_matches("L ")
            .split(' ')
            .map(|x| x.parse().expect("a number"))
            .collect();
        if line.starts_with("L ") {
            let key = (v[0], v[1], v[2]);
            result.insert(key, (v[3] == 1, vec![Vec::new(); v[1] as usize]));
            current = Some(key);
        } else {
            let key = current.expect("a launch line first");
            let lists = &mut result.get_mut(&key).expect("inserted").1;
            lists[v[0] as usize].push(Item {
                tile: v[1],
                kb_begin: v[2],
                kb_end: v[3],
                first_helper: v[4],
                last_helper: v[5],
                units: v[6],
            });
        }
    }
    assert_eq!(result.len(), launches.len(), "every launch printed");
    result
}

/// The properties the kernel relies on, for one launch.
fn check_launch((tiles, clusters, kbs): Launch, split: bool, lists: &[Vec<Item>]) {
    let what = format!("{tiles} tiles, {clusters} clusters, {kbs} k-blocks (split {split})");
    let waves = if split {
        tiles / clusters
    } else {
        (tiles + clusters - 1) / clusters
    };
    // k-blocks computed per tile, owners, and the clusters that computed a piece they do not own.
    let mut covered: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
    let mut owners: BTreeMap<i64, (i64, Item)> = BTreeMap::new();
    let mut pieces: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for (c, items) in lists.iter().enumerate() {
        let c = c as i64;
        // Whole tiles first, in step 6's order: c, c + clusters, ...
        for (i, item) in items.iter().enumerate().take(waves as usize) {
            let i = i as i64;
            if c + i * clusters >= tiles {
                break;
            }
            assert_eq!(
                (item.tile, item.kb_begin, item.kb_end),
                (c + i * clusters, 0, kbs),
                "{what}: cluster {c} item {i} is not step 6's whole tile"
            );
        }
        if !split {
            let step6: Vec<i64> = (0..)
                .map(|i| c + i * clusters)
                .take_while(|&t| t < tiles)
                .collect();
            let got: Vec<i64> = items.iter().map(|w| w.tile).collect();
            assert_eq!(
                got, step6,
                "{what}: unsplit, cluster {c} must follow step 6"
            );
        }
        let mut helper_pieces = 0;
        let mut owned_tail_tile = false;
        for item in items {
            assert!(
                0 <= item.kb_begin && item.kb_begin < item.kb_end && item.kb_end <= kbs,
                "{what}: cluster {c} has an empty or out-of-range item {item:?}"
            );
            assert!(item.tile < tiles, "{what}: cluster {c}: {item:?}");
            covered
                .entry(item.tile)
                .or_default()
                .push((item.kb_begin, item.kb_end));
            if item.kb_begin == 0 {
                let previous = owners.insert(item.tile, (c, *item));
                assert!(previous.is_none(), "{what}: tile {} owned twice", item.tile);
                if item.tile >= waves * clusters {
                    owned_tail_tile = true;
                }
            } else {
                helper_pieces += 1;
                // Its partials wait in the workspace until the owner reads them: a helper must
                // never wait as an owner first, or two clusters could wait for each other.
                assert!(
                    !owned_tail_tile,
                    "{what}: cluster {c} owns a tail tile before its helper piece"
                );
                pieces.entry(item.tile).or_default().insert(c);
            }
        }
        assert!(
            helper_pieces <= 1,
            "{what}: cluster {c} needs {helper_pieces} workspace slots"
        );
    }
    // Every tile: its k-blocks exactly once, and one owner.
    assert_eq!(covered.len() as i64, tiles, "{what}: tiles missing");
    for (tile, mut ranges) in covered {
        ranges.sort();
        let mut next = 0;
        for (b, e) in ranges {
            assert_eq!(
                b, next,
                "{what}: tile {tile}: k-blocks from {next} missing or twice"
            );
            next = e;
        }
        assert_eq!(next, kbs, "{what}: tile {tile} ends at k-block {next}");
        let (owner, item) = owners[&tile];
        // The owner waits for exactly the clusters that computed the tile's other pieces.
        let helpers = pieces.remove(&tile).unwrap_or_default();
        let listed: BTreeSet<i64> = (item.first_helper..item.last_helper)
            .filter(|&h| {
                let (b, e) = (item.units * h / clusters, item.units * (h + 1) / clusters);
                b < e
            })
            .collect();
        assert_eq!(
            listed, helpers,
            "{what}: tile {tile}: owner {owner} waits for {listed:?}, pieces from {helpers:?}"
        );
    }
}

fn launches() -> Vec<Launch> {
    let mut v = Vec::new();
    for clusters in 1..=12 {
        for tiles in clusters..=40 {
            for kbs in [1, 2, 3, 5, 7, 25, 26, 64] {
                v.push((tiles, clusters, kbs));
            }
        }
    }
    // The bench shapes on 66 clusters, and odd tails on them.
    v.extend([
        (512, 66, 64),
        (1024, 66, 128),
        (1024, 66, 64),
        (67, 66, 26),
        (131, 66, 128),
        (99, 8, 128),
    ]);
    v
}

#[test]
fn every_k_block_is_computed_once_and_every_split_tile_is_fixed_up_by_its_owner() {
    // The kernel's own threshold, and 0: every tail split that shortens the last wave at all,
    // which exercises the split schedule on small launches too.
    let list = launches();
    for fixup in [fixup_k_blocks(&schedule_text()), 0] {
        let all = schedules(fixup, &list);
        let mut split = 0;
        for (&launch, (s, lists)) in &all {
            check_launch(launch, *s, lists);
            split += usize::from(*s);
        }
        assert!(
            split > 100,
            "FIXUP_K_BLOCKS {fixup}: only {split} launches split"
        );
    }
}

#[test]
fn the_contender_6_streamk_is_step_7s_twin() {
    // One file: the contender runs step 7's twin under step 6's host plan, so what the bench
    // times as 6-streamk is the schedule checked here.
    let contenders = std::fs::read_to_string(format!(
        "{}/../runner/src/contenders.rs",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the contenders' registry is in the repository");
    let entry = contenders
        .split("Contender {")
        .find(|c| c.contains("name: \"6-streamk\""))
        .expect("6-streamk is registered");
    assert!(
        entry.contains(&format!("path: \"{KERNEL}\"")),
        "6-streamk must run {KERNEL}"
    );
}
