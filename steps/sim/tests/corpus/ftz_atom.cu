// The simulator's corpus of flush-to-zero forms, the packed f32x2 arithmetic of sm_100 and the
// vector atomics of sm_90+. Thread i reads A[i], B[i], C[i] and writes O[i] (the atomic kernels
// say what they write). The `__nvvm_*_ftz_*` builtins give the `.ftz` forms NVRTC emits under
// `-ftz=true`, without that option (the corpus is compiled with the workbook's own options).
// steps/sim/tests/corpus_ftz_atom.rs runs the PTX (ftz_atom.ptx, next to it; regenerate with
// gen.py; tests/tests/sim_corpus.rs checks it is current) against a CPU reference.
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define F1(n, ...) extern "C" __global__ void n(const float* A, const float* B, const float* C, float* O) \
  { int i = threadIdx.x; float x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }

// .ftz on f32 (PTX ISA: subnormal inputs and results flushed to sign-preserving zero).
F1(k_add_ftz, __nvvm_add_rn_ftz_f(x, y))
F1(k_mul_rz_ftz, __nvvm_mul_rz_ftz_f(x, y))
F1(k_fma_ftz, __nvvm_fma_rn_ftz_f(x, y, z))
F1(k_div_ftz, __nvvm_div_rn_ftz_f(x, y))
F1(k_sqrt_ftz, __nvvm_sqrt_rn_ftz_f(x))
F1(k_rcp_ftz, __nvvm_rcp_rn_ftz_f(x))
F1(k_min_ftz, __nvvm_fmin_ftz_f(x, y))
F1(k_max_ftz, __nvvm_fmax_ftz_f(x, y))
F1(k_sat_ftz, __nvvm_saturate_ftz_f(x))
F1(k_abs_ftz, __nvvm_fabs_ftz_f(x))
F1(k_d2f_ftz, __nvvm_d2f_rn_ftz((double)x * (double)y))
F1(k_floor_ftz, __nvvm_floor_ftz_f(x))
F1(k_trunc_ftz, __nvvm_trunc_ftz_f(x))
// slct (PTX ISA): d = c >= 0 ? a : b; .ftz flushes a subnormal c to the zero of its sign.
F1(k_slct_ftz, [&]{ float r_; asm("slct.ftz.f32.f32 %0, %1, %2, %3;" : "=f"(r_) : "f"(y), "f"(z), "f"(x)); return r_; }())
F1(k_slct, [&]{ float r_; asm("slct.f32.f32 %0, %1, %2, %3;" : "=f"(r_) : "f"(y), "f"(z), "f"(x)); return r_; }())
F1(k_slct_s32, [&]{ float r_; asm("slct.f32.s32 %0, %1, %2, %3;" : "=f"(r_) : "f"(y), "f"(z), "r"(__float_as_int(x))); return r_; }())

// Packed f32x2 (sm_100): lane 0 from A/B/C[2i], lane 1 from [2i+1].
#define P2(n, ...) extern "C" __global__ void n(const float2* A, const float2* B, const float2* C, float2* O) \
  { int i = threadIdx.x; float2 x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
P2(k_fadd2, __fadd2_rn(x, y))
P2(k_fmul2, __fmul2_rn(x, y))
P2(k_ffma2, __ffma2_rn(x, y, z))
#define P2ASM(n, op, ...) extern "C" __global__ void n(const float2* A, const float2* B, const float2* C, float2* O) \
  { int i = threadIdx.x; unsigned long long x = *(const unsigned long long*)&A[i], y = *(const unsigned long long*)&B[i], \
    z = *(const unsigned long long*)&C[i], d; (void)z; asm(op : "=l"(d) : __VA_ARGS__); *(unsigned long long*)&O[i] = d; }
P2ASM(k_add_rz_ftz_x2, "add.rz.ftz.f32x2 %0, %1, %2;", "l"(x), "l"(y))
P2ASM(k_sub_ftz_x2, "sub.ftz.f32x2 %0, %1, %2;", "l"(x), "l"(y))
P2ASM(k_mul_ftz_x2, "mul.rn.ftz.f32x2 %0, %1, %2;", "l"(x), "l"(y))
P2ASM(k_fma_rm_ftz_x2, "fma.rm.ftz.f32x2 %0, %1, %2, %3;", "l"(x), "l"(y), "l"(z))

// atomicAdd on float: global memory flushes subnormal inputs and results, shared memory keeps
// them (PTX ISA atom/red). Every thread adds A[i] to O[64] and to a shared word; O[i] is the
// old global value it saw; thread 0 copies the shared word to O[65].
extern "C" __global__ void k_atomicAdd_float_subnormal(const float* A, const float* B, const float* C, float* O)
  { __shared__ float s; int i = threadIdx.x; if (i == 0) s = B[0]; __syncthreads();
    atomicAdd(&s, A[i]); O[i] = atomicAdd(&O[64], A[i]); __syncthreads(); if (i == 0) O[65] = s; }

// Vector atomics (sm_90+, global only): every thread adds its vector to O[64..]; O[i] is one
// element of the old value it saw.
extern "C" __global__ void k_atomicAdd_float2(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; float2 v = make_float2(__uint_as_float(A[i]), __uint_as_float(B[i]));
    float2 o = atomicAdd((float2*)&O[64], v); O[i] = __float_as_uint(o.x); }
extern "C" __global__ void k_atomicAdd_float4(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; float4 v = make_float4(__uint_as_float(A[i]), __uint_as_float(B[i]), 1.0f, -2.0f);
    float4 o = atomicAdd((float4*)&O[64], v); O[i] = __float_as_uint(o.y); }
// The result unused: NVRTC emits red.global.add.v4.f32.
extern "C" __global__ void k_red_float4(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; float4 v = make_float4(__uint_as_float(A[i]), __uint_as_float(B[i]), 0.25f, -0.5f);
    atomicAdd((float4*)&O[64], v); }
// Packed halves: v2.f16x2 add, v4.bf16x2 max, v8.f16 min (O[64..] as 16-bit elements).
extern "C" __global__ void k_atom_v2_f16x2_add(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; unsigned d0, d1;
    asm volatile("atom.global.v2.f16x2.add.noftz {%0, %1}, [%2], {%3, %4};" : "=r"(d0), "=r"(d1)
                 : "l"(&O[64]), "r"(A[i]), "r"(B[i]) : "memory");
    O[i] = d1; }
extern "C" __global__ void k_red_v4_bf16x2_max(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x;
    asm volatile("red.global.v4.bf16x2.max.noftz [%0], {%1, %2, %3, %4};"
                 :: "l"(&O[64]), "r"(A[i]), "r"(B[i]), "r"(C[i]), "r"(A[i] ^ 0x80008000u) : "memory"); }
extern "C" __global__ void k_atom_v8_f16_min(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; unsigned short h[8], d[8];
    for (int k = 0; k < 8; k++) h[k] = (unsigned short)((k & 1 ? B[i] : A[i]) >> (16 * (k >> 2)));
    asm volatile("atom.global.v8.f16.min.noftz {%0, %1, %2, %3, %4, %5, %6, %7}, [%8], {%9, %10, %11, %12, %13, %14, %15, %16};"
                 : "=h"(d[0]), "=h"(d[1]), "=h"(d[2]), "=h"(d[3]), "=h"(d[4]), "=h"(d[5]), "=h"(d[6]), "=h"(d[7])
                 : "l"(&O[64]), "h"(h[0]), "h"(h[1]), "h"(h[2]), "h"(h[3]), "h"(h[4]), "h"(h[5]), "h"(h[6]), "h"(h[7]) : "memory");
    O[i] = d[0] | ((unsigned)d[7] << 16); }
