// trace.cuh: warp-role timelines (`runner step N --trace`), the phases a kernel marks and
// their recorder.
// Included by common.cuh (kernels include common.cuh, blackwell.cuh or hopper.cuh, never this
// file); it relies on common.cuh's types and on what common.cuh defines before including it.
#pragma once

namespace wb {

// ---------------------------------------------------------------------------------------------
// Warp-role timelines (`runner step N --trace`)
// ---------------------------------------------------------------------------------------------
// A kernel declares `wb::Trace trace;` once, before its set-up, and each warp says where it moves on to
// another phase of its role, `trace.enter(wb::TRACE_LOAD, kb)`, and where a persistent loop takes
// a new tile, `trace.start_tile(tile)`. A phase lasts until the warp enters the next one, so one
// call marks both ends. Only a build with -DWB_TRACE=1 (which the host adds for --trace) records:
// lane 0 of every warp of the first few CTAs writes each call into the warp's own region of a
// global buffer with two 16-byte stores it does not wait for (no atomics while the region has
// room), so recording barely perturbs the warp. Otherwise `Trace` is empty and every call
// compiles to nothing: tests/tests/trace_builds.rs checks that each kernel's SASS equals that of
// the kernel with its trace lines deleted. Host side: common::trace (layout, decoding, spans),
// runner/src/trace.rs (Perfetto JSON, SVG timeline).

// What a warp is doing; mirrored by common::trace::Phase (a test compiles the two against each
// other).
enum TracePhase : u32 {
  TRACE_SETUP = 0,       // from kernel entry: barriers, tensor memory, the first CTA/cluster sync
  TRACE_IDLE,            // set-up is over and this warp has no work of its own (yet)
  TRACE_SLOT_WAIT,       // producer: waits for a free ring slot (load_empty)
  TRACE_LOAD,            // producer: issues a k-block's TMA loads
  TRACE_DATA_WAIT,       // MMA warp / consumer: waits for a k-block to land (load_full)
  TRACE_MMA,             // MMA warp / consumer: issues a k-block's MMAs and commits them
  TRACE_MMA_WAIT,        // consumer: waits for its previous wgmma group (wgmma.wait_group)
  TRACE_ACC_EMPTY_WAIT,  // MMA warp: waits for the epilogue to release the accumulator
  TRACE_TURN_WAIT,       // ping-pong consumer: waits for the other consumer's MMAs to be issued
  TRACE_OUT_EMPTY_WAIT,  // Hopper consumer: waits for the store warp to have read `out`
  TRACE_ACC_WAIT,        // epilogue: waits for the accumulator to be final
  TRACE_EPILOGUE,        // epilogue: accumulator -> registers -> (shared ->) global
  TRACE_TAIL,            // producer tail: waits for the last commits aimed at this CTA
  TRACE_TEARDOWN,        // the last CTA/cluster sync, freeing tensor memory
  TRACE_EXIT,            // the warp leaves the kernel: ends its last phase
};

// One call of a warp, 32 bytes; mirrored by common::trace::Record.
struct TraceRecord {
  u64 globaltimer;      // %globaltimer: ns, one timer for the whole GPU
  u64 clock;            // %clock64: cycles of this SM, finer-grained
  u32 arg;              // what the phase is about (a k-block), or the tile
  u32 smid;             // %smid: the SM this CTA runs on
  u32 cta;              // blockIdx.x + gridDim.x * blockIdx.y
  unsigned short warp;  // warp_id()
  unsigned char phase;  // TracePhase
  unsigned char kind;   // TRACE_KIND_ENTER or TRACE_KIND_TILE; 0: an unwritten slot
};
static_assert(sizeof(TraceRecord) == 32, "common::trace::RECORD_BYTES");
constexpr u32 TRACE_KIND_ENTER = 1;
constexpr u32 TRACE_KIND_TILE = 2;

}  // namespace wb

#if defined(WB_TRACE) && WB_TRACE
// Set by the host (cuModuleGetGlobal, common::trace::TraceBuffer::install) before the launch.
__device__ wb::TraceRecord* wb_trace_records;  // ctas x warps-per-CTA regions of per_warp records
__device__ u32 wb_trace_per_warp;              // records in each warp's region
__device__ u32 wb_trace_ctas;                  // CTAs 0 .. wb_trace_ctas - 1 record
__device__ u64 wb_trace_dropped;               // calls that found their warp's region full
#endif

namespace wb {

#if defined(WB_TRACE) && WB_TRACE
// %globaltimer, %clock64, %smid (PTX ISA "Special Registers"). %globaltimer is comparable across
// SMs but may tick in coarse steps; %clock64 is fine-grained but per SM: the host maps one onto the
// other per CTA. The "memory" clobbers keep the reads where the call is.
__device__ __forceinline__ u64 globaltimer_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  return t;
}
__device__ __forceinline__ u64 clock64_cycles() {
  u64 c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
  return c;
}
__device__ __forceinline__ u32 sm_id() {
  u32 id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

class Trace {
 public:
  // Kernel entry: find this warp's region (none outside the recorded CTAs) and enter set-up.
  __device__ __forceinline__ Trace() {
    const u32 cta = blockIdx.x + gridDim.x * blockIdx.y;
    const u32 warps = blockDim.x / 32;
    next_ = cta < wb_trace_ctas
                ? wb_trace_records + (static_cast<size_t>(cta) * warps + warp_id()) * wb_trace_per_warp
                : nullptr;
    left_ = wb_trace_per_warp;
    enter(TRACE_SETUP);
  }
  // Warp-level: from now on this warp is in `phase` (about `arg`, e.g. a k-block).
  __device__ __forceinline__ void enter(TracePhase phase, int arg = 0) {
    record(TRACE_KIND_ENTER, phase, arg);
  }
  // Warp-level: a persistent loop starts tile `tile`.
  __device__ __forceinline__ void start_tile(int tile) { record(TRACE_KIND_TILE, 0, tile); }

 private:
  __device__ __forceinline__ void record(u32 kind, u32 phase, int arg) {
    if (next_ == nullptr) return;
    if (lane_id() == 0) {
      const u64 t = globaltimer_ns();
      const u64 c = clock64_cycles();
      if (left_ > 0) {
        // st.global (__stcg), not a generic store: the records live in global memory, and a
        // generic store would look like a staging write to the TMA-store ordering check.
        uint4* dst = reinterpret_cast<uint4*>(next_);
        __stcg(&dst[0], make_uint4(static_cast<u32>(t), static_cast<u32>(t >> 32),
                                   static_cast<u32>(c), static_cast<u32>(c >> 32)));
        __stcg(&dst[1], make_uint4(static_cast<u32>(arg), sm_id(),
                                   blockIdx.x + gridDim.x * blockIdx.y,
                                   warp_id() | (phase << 16) | (kind << 24)));
      } else {
        atomicAdd(&wb_trace_dropped, 1ull);  // the host reports how many did not fit
      }
    }
    if (left_ > 0) {
      ++next_;
      --left_;
    }
  }
  TraceRecord* next_;  // this warp's next free record; nullptr: this CTA does not record
  u32 left_;           // free records left in the region
};
#elif defined(WB_TWIN_CHECK) && WB_TWIN_CHECK && defined(WB_HANG_DIAG) && WB_HANG_DIAG
// BEGIN hang diagnosis
// A hang diagnosis build: each warp's last phase and tile only, for the report of a wait that
// outlived its bound (wb::check::record_wait). Every lane writes the same values.
class Trace {
 public:
  __device__ __forceinline__ void enter(TracePhase phase, int arg = 0) { check::note_phase(phase, arg); }
  __device__ __forceinline__ void start_tile(int tile) { check::note_tile(tile); }
};
// END hang diagnosis
#else
// Not a trace build: nothing is recorded and every call compiles to nothing.
class Trace {
 public:
  __device__ __forceinline__ void enter(TracePhase, int = 0) {}
  __device__ __forceinline__ void start_tile(int) {}
};
#endif

}  // namespace wb
