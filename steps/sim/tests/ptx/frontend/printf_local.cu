// Front-end test kernels (steps/sim/tests/frontend.rs); nvrtc_ptx.py writes the .ptx beside.
// NVRTC has no <cassert>; its builtin headers declare assert() (lowered to __assertfail).

extern "C" __global__ void local_array(const int* in, int* out, int n) {
    // A local array indexed by a value the compiler cannot know: it lives in local memory.
    int buf[16];
    for (int i = 0; i < 16; i++) buf[i] = in[i] * (int)threadIdx.x;
    int k = in[16 + threadIdx.x] & 15;
    out[threadIdx.x] = buf[k] + buf[(k + n) & 15];
}

extern "C" __global__ void printer(int a, unsigned b, float f, double d, long long ll, const char* s) {
    printf("a=%d b=%u x=%x X=%#X o=%o c=%c\n", a, b, b, b, b, 'Q');
    printf("f=%f e=%.3e g=%g G=%G w=[%8.2f] l=[%-6d] z=[%05d]\n", f, d, d, 1e-7, f, a, a);
    printf("ll=%lld llu=%llu ld=%ld s=%s p=%p pct=%%\n", ll, (unsigned long long)ll, (long)ll, s, (void*)0);
    printf("tid %d\n", (int)threadIdx.x);
}

extern "C" __global__ void asserter(const int* in, int* out) {
    int v = in[threadIdx.x];
    assert(v < 100);
    out[threadIdx.x] = v + 1;
}

extern "C" __global__ void block_shared(int* out) {
    __shared__ int tile[64];
    tile[threadIdx.x] = (int)threadIdx.x * 3;
    __syncthreads();
    out[threadIdx.x] = tile[63 - threadIdx.x];
}

__device__ __noinline__ int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }

extern "C" __global__ void caller(const int* in, int* out) {
    out[threadIdx.x] = fact(in[threadIdx.x]);
}

// An inline-asm wait loop, inlined three times: each copy's `bra` must go to its own label.
__device__ __forceinline__ int spin_count(int n) {
    int r;
    asm volatile(
        "{\n\t.reg .pred p;\n\t.reg .b32 c;\n\t"
        "mov.b32 c, %1;\n\tmov.b32 %0, 0;\n"
        "LAB_WAIT:\n\t"
        "add.s32 %0, %0, 1;\n\tsub.s32 c, c, 1;\n\tsetp.gt.s32 p, c, 0;\n\t"
        "@p bra LAB_WAIT;\n\t}"
        : "=r"(r)
        : "r"(n));
    return r;
}

extern "C" __global__ void three_waits(const int* in, int* out) {
    int a = spin_count(in[0]);
    int b = spin_count(in[1]);
    int c = spin_count(in[2]);
    out[0] = a;
    out[1] = b;
    out[2] = c;
}

struct Params {
    int a;
    float b;
    long long c;
    short d[3];
};

// A struct passed by value: a `.param .align 8 .b8 name[24]` kernel parameter.
extern "C" __global__ void by_value(Params p, long long* out) {
    out[0] = p.a;
    out[1] = (long long)(p.b * 4.0f);
    out[2] = p.c;
    out[3] = p.d[0] ^ (p.d[1] << 4) ^ (p.d[2] << 8);
}
