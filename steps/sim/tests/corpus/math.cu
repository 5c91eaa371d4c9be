// The instruction-coverage corpus of the simulator: one tiny kernel per CUDA math function or
// intrinsic. Thread i reads A[i], B[i], C[i] and writes f(A[i], ...) to O[i] (the warp and atomic
// kernels say what they write). steps/sim/tests/corpus.rs runs the PTX NVRTC makes of this file
// (math.ptx, next to it; tests/tests/sim_corpus.rs checks it is current) and compares each
// result with a CPU reference within the bound the CUDA C++ Programming Guide states.
#pragma nv_diag_suppress 550
#pragma nv_diag_suppress 177
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define F1(n, ...) extern "C" __global__ void n(const float* A, const float* B, const float* C, float* O) \
  { int i = threadIdx.x; float x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
#define FU(n, ...) extern "C" __global__ void n(const float* A, const float* B, const float* C, unsigned* O) \
  { int i = threadIdx.x; float x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (unsigned)(__VA_ARGS__); }
#define UF(n, ...) extern "C" __global__ void n(const unsigned* A, const unsigned* B, const unsigned* C, float* O) \
  { int i = threadIdx.x; unsigned x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
#define U1(n, ...) extern "C" __global__ void n(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O) \
  { int i = threadIdx.x; unsigned x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
#define D1(n, ...) extern "C" __global__ void n(const double* A, const double* B, const double* C, double* O) \
  { int i = threadIdx.x; double x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
#define L1(n, ...) extern "C" __global__ void n(const unsigned long long* A, const unsigned long long* B, \
  const unsigned long long* C, unsigned long long* O) \
  { int i = threadIdx.x; unsigned long long x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }

// f32 math functions (Guide, "Single-Precision Floating-Point Functions").
F1(k_sqrtf, sqrtf(x))
F1(k_rsqrtf, rsqrtf(x))
F1(k_expf, expf(x))
F1(k_exp2f, exp2f(x))
F1(k_logf, logf(x))
F1(k_log2f, log2f(x))
F1(k_sinf, sinf(x))
F1(k_cosf, cosf(x))
F1(k_tanhf, tanhf(x))
F1(k_powf, powf(x, y))
F1(k_fmaf, fmaf(x, y, z))
F1(k_div, x / y)
F1(k_fdividef, fdividef(x, y))
F1(k_erff, erff(x))
F1(k_atan2f, atan2f(x, y))
F1(k_fminf, fminf(x, y))
F1(k_fmaxf, fmaxf(x, y))
F1(k_rintf, rintf(x))
F1(k_floorf, floorf(x))
F1(k_ceilf, ceilf(x))
F1(k_truncf, truncf(x))
F1(k_roundf, roundf(x))
F1(k_copysignf, copysignf(x, y))
F1(k_fabsf, fabsf(x))
// f32 intrinsics (Guide, "Intrinsic Functions").
F1(k___fsqrt_rn, __fsqrt_rn(x))
F1(k___fsqrt_rz, __fsqrt_rz(x))
F1(k___fsqrt_ru, __fsqrt_ru(x))
F1(k___fsqrt_rd, __fsqrt_rd(x))
F1(k___expf, __expf(x))
F1(k___logf, __logf(x))
F1(k___sinf, __sinf(x))
F1(k___cosf, __cosf(x))
F1(k___fdividef, __fdividef(x, y))
F1(k___frcp_rn, __frcp_rn(x))
F1(k___frcp_rz, __frcp_rz(x))
F1(k___fadd_rz, __fadd_rz(x, y))
F1(k___fadd_ru, __fadd_ru(x, y))
F1(k___fadd_rd, __fadd_rd(x, y))
F1(k___fmul_rz, __fmul_rz(x, y))
F1(k___fmul_ru, __fmul_ru(x, y))
F1(k___fmul_rd, __fmul_rd(x, y))
F1(k___fdiv_rz, __fdiv_rz(x, y))
F1(k___fdiv_ru, __fdiv_ru(x, y))
F1(k___fdiv_rd, __fdiv_rd(x, y))
F1(k___saturatef, __saturatef(x))
F1(k___fmul_sat_ftz, __saturatef(__fmul_rn(x, y)))
// Conversions.
FU(k___float2int_rn, __float2int_rn(x))
FU(k___float2int_rz, __float2int_rz(x))
FU(k___float2int_rd, __float2int_rd(x))
FU(k___float2int_ru, __float2int_ru(x))
FU(k___float2uint_rn, __float2uint_rn(x))
UF(k___int2float_rn, __int2float_rn((int)x))
UF(k___int2float_rz, __int2float_rz((int)x))
UF(k___int2float_rd, __int2float_rd((int)x))
UF(k___int2float_ru, __int2float_ru((int)x))
UF(k___uint2float_rn, __uint2float_rn(x))
FU(k___float2half_rn, __half_as_ushort(__float2half_rn(x)))
FU(k___float2half_rz, __half_as_ushort(__float2half_rz(x)))
UF(k___half2float, __half2float(__ushort_as_half((unsigned short)x)))
FU(k___float2bfloat16, __bfloat16_as_ushort(__float2bfloat16(x)))
UF(k___bfloat162float, __bfloat162float(__ushort_as_bfloat16((unsigned short)x)))
FU(k___floats2half2_rn, [&]{ __half2 h = __floats2half2_rn(x, y); return *(unsigned*)&h; }())
FU(k___floats2bfloat162_rn, [&]{ __nv_bfloat162 h = __floats2bfloat162_rn(x, y); return *(unsigned*)&h; }())
// f16 / bf16 arithmetic on packed halves: x holds (lo, hi) halves.
#define H2(v) (*(const __half2*)&(v))
#define B2(v) (*(const __nv_bfloat162*)&(v))
#define UH2(e) [&]{ __half2 r_ = (e); return *(unsigned*)&r_; }()
#define UB2(e) [&]{ __nv_bfloat162 r_ = (e); return *(unsigned*)&r_; }()
U1(k___hadd, __half_as_ushort(__hadd(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hmul, __half_as_ushort(__hmul(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hfma, __half_as_ushort(__hfma(__ushort_as_half(x), __ushort_as_half(y), __ushort_as_half(z))))
U1(k___hadd2, UH2(__hadd2(H2(x), H2(y))))
U1(k___hmul2, UH2(__hmul2(H2(x), H2(y))))
U1(k___hfma2, UH2(__hfma2(H2(x), H2(y), H2(z))))
U1(k___hmax, __half_as_ushort(__hmax(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hmin_nan, __half_as_ushort(__hmin_nan(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hlt, (unsigned)__hlt(__ushort_as_half(x), __ushort_as_half(y)))
U1(k_hexp2, __half_as_ushort(hexp2(__ushort_as_half(x))))
U1(k___hadd_bf16, __bfloat16_as_ushort(__hadd(__ushort_as_bfloat16(x), __ushort_as_bfloat16(y))))
U1(k___hfma_bf16, __bfloat16_as_ushort(__hfma(__ushort_as_bfloat16(x), __ushort_as_bfloat16(y), __ushort_as_bfloat16(z))))
U1(k___hmul2_bf16, UB2(__hmul2(B2(x), B2(y))))
U1(k___hfma2_bf16, UB2(__hfma2(B2(x), B2(y), B2(z))))
// Integer intrinsics.
U1(k___popc, (unsigned)__popc(x))
U1(k___clz, (unsigned)__clz((int)x))
U1(k___brev, __brev(x))
U1(k___ffs, (unsigned)__ffs((int)x))
U1(k___byte_perm, __byte_perm(x, y, z))
U1(k___funnelshift_l, __funnelshift_l(x, y, z))
U1(k___funnelshift_r, __funnelshift_r(x, y, z))
U1(k___funnelshift_lc, __funnelshift_lc(x, y, z))
U1(k___mul24, (unsigned)__mul24((int)x, (int)y))
U1(k___umul24, __umul24(x, y))
U1(k___umulhi, __umulhi(x, y))
U1(k___mulhi, (unsigned)__mulhi((int)x, (int)y))
U1(k___sad, __sad((int)x, (int)y, z))
U1(k___usad, __usad(x, y, z))
U1(k___dp4a, (unsigned)__dp4a((int)x, (int)y, (int)z))
U1(k___dp4a_u, __dp4a(x, y, z))
U1(k___dp2a_lo, (unsigned)__dp2a_lo((int)x, (int)y, (int)z))
U1(k___dp2a_hi, __dp2a_hi(x, y, z))
U1(k_imin, (unsigned)min((int)x, (int)y))
U1(k_umax, max(x, y))
U1(k_iabs, (unsigned)abs((int)x))
U1(k_idiv, y ? (unsigned)((int)x / (int)(y | 1)) : 0u)
U1(k_urem, y ? x % y : 0u)
// Carry chains: a 128-bit add and multiply-add written with the extended-precision instructions.
L1(k_add_cc, [&]{ unsigned lo, hi; asm("add.cc.u32 %0, %2, %3;\n\taddc.u32 %1, %4, %5;" : "=r"(lo), "=r"(hi) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)(x >> 32)), "r"((unsigned)(y >> 32))); return ((unsigned long long)hi << 32) | lo; }())
L1(k_sub_cc, [&]{ unsigned lo, hi; asm("sub.cc.u32 %0, %2, %3;\n\tsubc.u32 %1, %4, %5;" : "=r"(lo), "=r"(hi) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)(x >> 32)), "r"((unsigned)(y >> 32))); return ((unsigned long long)hi << 32) | lo; }())
L1(k_mad_cc, [&]{ unsigned lo, hi; asm("mad.lo.cc.u32 %0, %2, %3, %4;\n\tmadc.hi.u32 %1, %2, %3, %5;" : "=r"(lo), "=r"(hi) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)z), "r"((unsigned)(z >> 32))); return ((unsigned long long)hi << 32) | lo; }())
L1(k___umul64hi, __umul64hi(x, y))
L1(k___popcll, (unsigned long long)__popcll(x))
L1(k___clzll, (unsigned long long)__clzll((long long)x))
L1(k___brevll, __brevll(x))
L1(k___ffsll, (unsigned long long)__ffsll((long long)x))
// f64 (Guide, "Double-Precision Floating-Point Functions").
D1(k_sqrt, sqrt(x))
D1(k_fma, fma(x, y, z))
D1(k_exp, exp(x))
D1(k_log, log(x))
// sin(double) calls a non-inlined .func (its slow-path argument reduction): the simulator does
// not model .func calls yet, so it is left out.
#ifdef WB_CORPUS_FUNC_CALLS
D1(k_sin, sin(x))
#endif
D1(k_rcp, 1.0 / x)
D1(k_ddiv, x / y)
D1(k___dadd_rz, __dadd_rz(x, y))
D1(k___dmul_ru, __dmul_ru(x, y))
D1(k___ddiv_rd, __ddiv_rd(x, y))
D1(k_rint, rint(x))
D1(k_floor, floor(x))
L1(k___double2ll_rn, (unsigned long long)__double2ll_rn(*(const double*)&x))
L1(k___ll2double_rn, [&]{ double d_ = __ll2double_rn((long long)x); return *(unsigned long long*)&d_; }())
L1(k___ull2float_rn, [&]{ float f_ = __ull2float_rn(x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___float2ll_rz, (unsigned long long)__float2ll_rz(*(const float*)&x))

// More directed-rounding intrinsics and conversions.
F1(k___fmaf_rz, __fmaf_rz(x, y, z))
F1(k___fmaf_ru, __fmaf_ru(x, y, z))
F1(k___fmaf_rd, __fmaf_rd(x, y, z))
F1(k___frcp_ru, __frcp_ru(x))
F1(k___frcp_rd, __frcp_rd(x))
FU(k___float2uint_rz, __float2uint_rz(x))
FU(k___float2uint_rd, __float2uint_rd(x))
FU(k___float2uint_ru, __float2uint_ru(x))
UF(k___uint2float_rz, __uint2float_rz(x))
UF(k___uint2float_rd, __uint2float_rd(x))
UF(k___uint2float_ru, __uint2float_ru(x))
FU(k___float2half_rd, __half_as_ushort(__float2half_rd(x)))
FU(k___float2half_ru, __half_as_ushort(__float2half_ru(x)))
FU(k___float2bfloat16_rz, __bfloat16_as_ushort(__float2bfloat16_rz(x)))
FU(k___float2bfloat16_rd, __bfloat16_as_ushort(__float2bfloat16_rd(x)))
FU(k___float2bfloat16_ru, __bfloat16_as_ushort(__float2bfloat16_ru(x)))
// fp8 (cuda_fp8.h): x's bits as f32 (or packed halves), the fp8 bits out.
FU(k_fp8_e4m3_sat, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3))
FU(k_fp8_e5m2_sat, __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2))
FU(k_fp8_e5m2_nosat, __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2))
FU(k_fp8x2_e4m3, __nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3))
U1(k_fp8_e4m3_to_half, __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, __NV_E4M3).x)
U1(k_fp8_e5m2_to_half, __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)x, __NV_E5M2).x)
U1(k_fp8x2_e4m3_to_half2, [&]{ __half2_raw h_ = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)x, __NV_E4M3); return (unsigned)h_.x | ((unsigned)h_.y << 16); }())
U1(k_half2_to_fp8x2_e5m2, [&]{ __half2_raw h_; h_.x = (unsigned short)x; h_.y = (unsigned short)(x >> 16); return (unsigned)__nv_cvt_halfraw2_to_fp8x2(h_, __NV_SATFINITE, __NV_E5M2); }())
// Packed half arithmetic beyond add/mul/fma.
U1(k___hsub, __half_as_ushort(__hsub(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hdiv, __half_as_ushort(__hdiv(__ushort_as_half(x), __ushort_as_half(y))))
U1(k___hsub2, UH2(__hsub2(H2(x), H2(y))))
U1(k___hmax2, UH2(__hmax2(H2(x), H2(y))))
U1(k___hmin2_nan, UH2(__hmin2_nan(H2(x), H2(y))))
U1(k___habs2, UH2(__habs2(H2(x))))
U1(k___hneg2, UH2(__hneg2(H2(x))))
U1(k___heq2, UH2(__heq2(H2(x), H2(y))))
U1(k___hadd2_sat, UH2(__hadd2_sat(H2(x), H2(y))))
U1(k___hmax_bf16, __bfloat16_as_ushort(__hmax(__ushort_as_bfloat16(x), __ushort_as_bfloat16(y))))
U1(k___hadd2_bf16, UB2(__hadd2(B2(x), B2(y))))
// SIMD video and DPX intrinsics.
U1(k___vadd2, __vadd2(x, y))
U1(k___vsub4, __vsub4(x, y))
U1(k___vabsdiffu4, __vabsdiffu4(x, y))
U1(k___vmaxs2, __vmaxs2(x, y))
U1(k___vminu4, __vminu4(x, y))
U1(k___vcmpeq2, __vcmpeq2(x, y))
U1(k___vcmpltu4, __vcmpltu4(x, y))
U1(k___vsads2, __vsads2(x, y))
U1(k___vavgu4, __vavgu4(x, y))
U1(k___vimax_s32_relu, (unsigned)__vimax_s32_relu((int)x, (int)y))
U1(k___vimin3_s32, (unsigned)__vimin3_s32((int)x, (int)y, (int)z))
U1(k___vimax3_u32, __vimax3_u32(x, y, z))
U1(k___viaddmax_s32, (unsigned)__viaddmax_s32((int)x, (int)y, (int)z))
U1(k___vimax_s16x2_relu, __vimax_s16x2_relu(x, y))
U1(k___vibmax_s32, [&]{ bool p_; int m_ = __vibmax_s32((int)x, (int)y, &p_); return (unsigned)m_ ^ ((unsigned)p_ << 31); }())
// 128- and 96-bit arithmetic as carry chains on 64-bit and 32-bit words (NVRTC accepts
// __int128 only with --device-int128, which the workbook's compile options do not pass).
L1(k_add_cc_u64, [&]{ unsigned long long lo, hi; asm("add.cc.u64 %0, %2, %3;\n\taddc.u64 %1, %4, %5;" : "=l"(lo), "=l"(hi) : "l"(x), "l"(y), "l"(z), "l"(x ^ y)); return hi ^ (lo * 3); }())
L1(k_sub_cc_u64, [&]{ unsigned long long lo, hi; asm("sub.cc.u64 %0, %2, %3;\n\tsubc.u64 %1, %4, %5;" : "=l"(lo), "=l"(hi) : "l"(x), "l"(y), "l"(z), "l"(x ^ y)); return hi ^ (lo * 3); }())
L1(k_add_cc_96, [&]{ unsigned a, b, c; asm("add.cc.u32 %0, %3, %4;\n\taddc.cc.u32 %1, %5, %6;\n\taddc.u32 %2, %7, %8;" : "=r"(a), "=r"(b), "=r"(c) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)(x >> 32)), "r"((unsigned)(y >> 32)), "r"((unsigned)z), "r"((unsigned)(z >> 32))); return ((unsigned long long)(b ^ c) << 32) | a; }())
L1(k_sub_cc_96, [&]{ unsigned a, b, c; asm("sub.cc.u32 %0, %3, %4;\n\tsubc.cc.u32 %1, %5, %6;\n\tsubc.u32 %2, %7, %8;" : "=r"(a), "=r"(b), "=r"(c) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)(x >> 32)), "r"((unsigned)(y >> 32)), "r"((unsigned)z), "r"((unsigned)(z >> 32))); return ((unsigned long long)(b ^ c) << 32) | a; }())
L1(k_madc_cc_u32, [&]{ unsigned a, b, c; asm("mad.lo.cc.u32 %0, %3, %4, %5;\n\tmadc.hi.cc.u32 %1, %3, %4, %6;\n\taddc.u32 %2, %6, 0;" : "=r"(a), "=r"(b), "=r"(c) : "r"((unsigned)x), "r"((unsigned)y), "r"((unsigned)z), "r"((unsigned)(z >> 32))); return ((unsigned long long)(b ^ c) << 32) | a; }())
// f64 directed rounding and conversions.
D1(k___dsqrt_rd, __dsqrt_rd(x))
D1(k___dsqrt_ru, __dsqrt_ru(x))
D1(k___drcp_rz, __drcp_rz(x))
D1(k___fma_rz, __fma_rz(x, y, z))
D1(k___dadd_rd, __dadd_rd(x, y))
D1(k___dsub_ru, __dsub_ru(x, y))
D1(k___dmul_rz, __dmul_rz(x, y))
D1(k___ddiv_ru, __ddiv_ru(x, y))
D1(k_trunc, trunc(x))
D1(k_ceil, ceil(x))
D1(k_fmin, fmin(x, y))
D1(k_fmax, fmax(x, y))
L1(k___double2float_rn, [&]{ float f_ = __double2float_rn(*(const double*)&x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___double2float_rz, [&]{ float f_ = __double2float_rz(*(const double*)&x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___double2float_rd, [&]{ float f_ = __double2float_rd(*(const double*)&x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___double2float_ru, [&]{ float f_ = __double2float_ru(*(const double*)&x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___double2int_rz, (unsigned long long)(unsigned)__double2int_rz(*(const double*)&x))
L1(k___double2uint_ru, (unsigned long long)__double2uint_ru(*(const double*)&x))
L1(k___double2ull_rd, __double2ull_rd(*(const double*)&x))
L1(k___int2double_rn, [&]{ double d_ = __int2double_rn((int)x); return *(unsigned long long*)&d_; }())
L1(k___ull2double_rz, [&]{ double d_ = __ull2double_rz(x); return *(unsigned long long*)&d_; }())
L1(k___ll2float_ru, [&]{ float f_ = __ll2float_ru((long long)x); return (unsigned long long)*(unsigned*)&f_; }())
L1(k___double2half_rn, (unsigned long long)__half_as_ushort(__double2half(*(const double*)&x)))

// Warp intrinsics: O[i] per lane.
#define W1(n, ...) extern "C" __global__ void n(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O) \
  { int i = threadIdx.x; unsigned x = A[i], y = B[i], z = C[i]; (void)y; (void)z; O[i] = (__VA_ARGS__); }
W1(k___shfl_sync, __shfl_sync(0xffffffffu, x, y & 31))
W1(k___shfl_sync_w8, __shfl_sync(0xffffffffu, x, y & 31, 8))
W1(k___shfl_up_sync, __shfl_up_sync(0xffffffffu, x, 3))
W1(k___shfl_up_sync_w16, __shfl_up_sync(0xffffffffu, x, 5, 16))
W1(k___shfl_down_sync, __shfl_down_sync(0xffffffffu, x, 7))
W1(k___shfl_down_sync_w8, __shfl_down_sync(0xffffffffu, x, 3, 8))
W1(k___shfl_xor_sync, __shfl_xor_sync(0xffffffffu, x, 5))
W1(k___shfl_xor_sync_w4, __shfl_xor_sync(0xffffffffu, x, 1, 4))
W1(k___ballot_sync, __ballot_sync(0xffffffffu, x & 1))
W1(k___all_sync, (unsigned)__all_sync(0xffffffffu, x & 1))
W1(k___any_sync, (unsigned)__any_sync(0xffffffffu, x & 1))
W1(k___uni_sync, (unsigned)__uni_sync(0xffffffffu, x & 1))
W1(k___activemask, (x & 1) ? __activemask() : 7u)
W1(k___reduce_add_sync, __reduce_add_sync(0xffffffffu, x))
W1(k___reduce_min_sync, (unsigned)__reduce_min_sync(0xffffffffu, (int)x))
W1(k___reduce_max_sync, __reduce_max_sync(0xffffffffu, x))
W1(k___reduce_and_sync, __reduce_and_sync(0xffffffffu, x))
W1(k___reduce_or_sync, __reduce_or_sync(0xffffffffu, x))
W1(k___reduce_xor_sync, __reduce_xor_sync(0xffffffffu, x))
W1(k___match_any_sync, __match_any_sync(0xffffffffu, x & 3))
W1(k___match_all_sync, [&]{ int p_; unsigned m_ = __match_all_sync(0xffffffffu, y & 1, &p_); return m_ ^ (unsigned)p_; }())
W1(k___shfl_sync_partial, (i & 1) ? __shfl_sync(0xAAAAAAAAu, x, (y & 15) * 2 + 1) : x + 1)
W1(k___ballot_sync_div, ((i & 31) < 20) ? __ballot_sync(0x000FFFFFu, x & 1) : 9u)
W1(k___match_any_sync_div, (i & 1) ? __match_any_sync(0xAAAAAAAAu, x & 3) : ((i & 31) < 16 ? __match_any_sync(0x00005555u, x & 1) : 5u))
W1(k___match_all_sync_div, [&]{ if ((i & 31) % 3 == 0) { int p_; unsigned m_ = __match_all_sync(0x49249249u, y & 1, &p_); return m_ ^ ((unsigned)p_ << 31); } return 11u; }())
W1(k___reduce_add_sync_div, ((i & 31) >= 8) ? __reduce_add_sync(0xFFFFFF00u, x) : 1u)
W1(k___match_any_sync_64, __match_any_sync(0xffffffffu, ((unsigned long long)(x & 1) << 40) | (y & 1)))
W1(k_lanemask_lt, [&]{ unsigned m_; asm("mov.u32 %0, %%lanemask_lt; " : "=r"(m_)); return m_; }())

// Atomics: every thread applies its operand to one word (global O[64] or a shared word), then
// thread 0 copies the shared word to O[65]; O[i] is the old value thread i saw.
// The shared word of the atomic kernels (module scope: one per CTA).
__shared__ unsigned long long s_word;
#define AT(n, T, op) extern "C" __global__ void n(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O) \
  { T& s = *(T*)&s_word; int i = threadIdx.x; T v = *(const T*)&A[i]; if (i == 0) s = *(const T*)&B[0]; \
    __syncthreads(); T g = op(&s, v); T h = op((T*)&O[64], v); (void)g; O[i] = *(unsigned*)&h; \
    __syncthreads(); if (i == 0) O[65] = *(unsigned*)&s; }
AT(k_atomicAdd_int, int, atomicAdd)
AT(k_atomicAdd_float, float, atomicAdd)
AT(k_atomicAdd_half2, __half2, atomicAdd)
AT(k_atomicAdd_bf162, __nv_bfloat162, atomicAdd)
AT(k_atomicExch, unsigned, atomicExch)
AT(k_atomicMin, int, atomicMin)
AT(k_atomicMax, unsigned, atomicMax)
AT(k_atomicAnd, unsigned, atomicAnd)
AT(k_atomicOr, unsigned, atomicOr)
AT(k_atomicXor, unsigned, atomicXor)
AT(k_atomicInc, unsigned, atomicInc)
AT(k_atomicDec, unsigned, atomicDec)
AT(k_atomicAdd_uint, unsigned, atomicAdd)
AT(k_atomicSub, unsigned, atomicSub)
AT(k_atomicMax_int, int, atomicMax)
AT(k_atomicMin_uint, unsigned, atomicMin)
extern "C" __global__ void k_atomicCAS_shared(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { unsigned& s = *(unsigned*)&s_word; int i = threadIdx.x; if (i == 0) s = 0; __syncthreads();
    // The first read is atomic too: a plain read racing with the other threads' CAS is a data
    // race in the PTX memory model (the happens-before checker reports it).
    unsigned old, cur = atomicAdd(&s, 0u); do { old = cur; cur = atomicCAS(&s, old, old + A[i]); } while (cur != old);
    O[i] = old; __syncthreads(); if (i == 0) O[65] = s; }
extern "C" __global__ void k_atomicAdd_ull(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; unsigned long long v = ((unsigned long long)A[i] << 20) | B[i];
    unsigned long long o = atomicAdd((unsigned long long*)&O[64], v); O[i] = (unsigned)(o >> 20); }
// Vector atomics (atom.global.add.v2.f32 / .v4.f32): checked from ftz_atom.cu; this copy stays off.
#ifdef WB_CORPUS_VECTOR_ATOMICS
extern "C" __global__ void k_atomicAdd_float2(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; float2 v = make_float2(__uint_as_float(A[i]), __uint_as_float(B[i]));
    float2 o = atomicAdd((float2*)&O[64], v); O[i] = __float_as_uint(o.x); }
extern "C" __global__ void k_atomicAdd_float4(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; float4 v = make_float4(__uint_as_float(A[i]), __uint_as_float(B[i]), 1.0f, -2.0f);
    float4 o = atomicAdd((float4*)&O[64], v); O[i] = __float_as_uint(o.y); }
#endif
extern "C" __global__ void k_atomicCAS(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; unsigned old = atomicCAS(&O[64], (unsigned)i, (unsigned)i + 1); O[i] = old; }
extern "C" __global__ void k_atomicAdd_double(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; atomicAdd((double*)&O[64], (double)A[i]); atomicAdd_block((double*)&O[66], 0.5); }
extern "C" __global__ void k_atomic_sem(const unsigned* A, const unsigned* B, const unsigned* C, unsigned* O)
  { int i = threadIdx.x; unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(&O[64]), "r"(A[i]) : "memory");
    O[i] = old; atomicAdd_system(&O[65], 1u); atomicAdd_block(&O[66], 2u); }
