// pipeline.cuh: a position in a ring of barrier-guarded slots, the bookkeeping every pipeline of
// the step kernels shares: the TMA -> MMA ring of shared-memory stages, and from step 4 on the
// ring of accumulators. blackwell.cuh and hopper.cuh include it after common.cuh (it uses u32).
//
// Each slot of a ring has a `full` mbarrier (its data is in) and an `empty` one (its readers are
// done). The k-th use of the ring (k = 0, 1, ...) takes slot k % N in round k / N, and in that
// round each barrier of the slot completes its phase number k / N: a barrier starts in phase 0
// and moves to the next phase each time its arrivals and bytes are all in (PTX ISA, "Phase of
// the mbarrier object"). A wait names a phase only by its parity, and only the current phase or
// the one just before it (PTX ISA, "mbarrier.test_wait/mbarrier.try_wait": the .parity form).
// So every waiter needs two numbers of one counter: the slot, and the parity of the round.
// Ring is that counter, with the formulas as named methods: a wait asks for phase() or
// empty_parity() instead of spelling out `(k / N) & 1` or `((k / N) - 1) & 1`, and one advance()
// moves the slot and the phase together. A role keeps its own Ring, and it runs on from tile to
// tile by itself. CUTLASS calls the same idea a PipelineState (it stores index and phase).
//
// Ring stores only the count. For a compile-time N the divisions become a shift or a
// multiply-high, and where the count runs in step with a loop counter the compiler merges the
// two: steps 0-3 compile to the same registers and no more SASS instructions than the formulas
// written out; the persistent kernels, whose roles keep their counts across tiles, take a few
// registers more (`runner inspect N`; assets/results/ring-inspect-2026-11-26.md).
#pragma once

namespace wb {

// ANCHOR: ring
template <int N>
struct Ring {
  static_assert(N >= 1, "a ring has at least one slot");

  int count_ = 0;  // uses so far: this use is use number count_ (from 0)

  // The position after `count` uses: for a thread that joins the ring part-way, such as a
  // consumer that skips the tiles another consumer takes.
  __device__ __forceinline__ static Ring at(int count) {
    Ring r;
    r.count_ = count;
    return r;
  }

  // The slot of this use.
  __device__ __forceinline__ int index() const { return count_ % N; }

  // The parity of this round's phase (round count_ / N): the wait for the slot's `full` barrier
  // (its data landed in this round) names it.
  __device__ __forceinline__ u32 phase() const { return static_cast<u32>(count_ / N) & 1; }

  // The parity of the previous round's phase: before refilling the slot, the writer waits for
  // its `empty` barrier to complete the phase its readers completed in the previous round.
  __device__ __forceinline__ u32 empty_parity() const { return phase() ^ 1; }

  // True in round 0: no reader has used the slot yet, so its writer has nothing to wait for.
  // The kernels skip that wait: with empty_parity() (1) it would name the phase before phase 0
  // on a fresh barrier, a phase the ISA does not define. It returns at once on hardware, and
  // CUTLASS's producers rely on that; the workbook stays inside the ISA.
  __device__ __forceinline__ bool first_round() const { return count_ < N; }

  // The next use: the next slot, and a new round after the last slot.
  __device__ __forceinline__ void advance() { ++count_; }
};
// ANCHOR_END: ring

}  // namespace wb
