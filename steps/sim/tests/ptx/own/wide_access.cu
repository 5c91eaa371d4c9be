// 256-bit global accesses (sm_100): ld/st .v8.b32 and .v4.b64, plain and with a relaxed.cta
// ordering and an L1 no-allocate hint, as hand-written epilogues emit them.
// Launch: grid 1, block 32; src: 32 * 16 u32 (32-byte aligned), dst: 32 * 16 u32.
// Expect: dst[16 t + j] == src[16 t + j] + 1 for j < 8 (v8 path) and == src[16 t + j] * 2 for
// j >= 8 (v4.b64 path, each 64-bit lane doubled as two u32 halves).
#include <cstdint>

extern "C" __global__ void wide_access(const uint32_t *src, uint32_t *dst) {
  const unsigned t = threadIdx.x;
  const uint32_t *s = src + 16 * t;
  uint32_t *d = dst + 16 * t;
  uint32_t v[8];
  asm volatile("ld.global.v8.b32 {%0, %1, %2, %3, %4, %5, %6, %7}, [%8];"
               : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]),
                 "=r"(v[6]), "=r"(v[7])
               : "l"(s));
  for (int j = 0; j < 8; j++) v[j] += 1;
  if (t % 2 == 0)
    asm volatile("st.global.v8.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};" ::"l"(d), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7])
                 : "memory");
  else
    asm volatile(
        "st.relaxed.cta.global.L1::no_allocate.v8.b32 [%0], {%1, %2, %3, %4, %5, %6, %7, %8};" ::"l"(d),
        "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(v[5]), "r"(v[6]), "r"(v[7])
        : "memory");
  uint64_t w[4];
  asm volatile("ld.global.v4.b64 {%0, %1, %2, %3}, [%4];"
               : "=l"(w[0]), "=l"(w[1]), "=l"(w[2]), "=l"(w[3])
               : "l"(s + 8));
  for (int j = 0; j < 4; j++) {
    const uint64_t lo = (uint32_t)w[j] * 2u, hi = (uint32_t)(w[j] >> 32) * 2u;
    w[j] = lo | (hi << 32);
  }
  asm volatile("st.global.v4.b64 [%0], {%1, %2, %3, %4};" ::"l"(d + 8), "l"(w[0]), "l"(w[1]),
               "l"(w[2]), "l"(w[3])
               : "memory");
}
