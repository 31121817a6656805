/* The argument block of ragdot_fill_uniform (fill_uniform.cuh), shared by the host, which fills
   it, and the kernel, and the value of each element, which the host reproduces with the same
   code (moe/uniform_fill.cpp). Plain C: the same layout and arithmetic on both sides. */
#ifndef RAGDOT_FILL_PARAMS_H
#define RAGDOT_FILL_PARAMS_H

typedef struct RagdotFillParams {
  void* data;           /* [count] out */
  long long count;
  int elem_bytes;       /* 2 (bf16 or f16) or 4 (f32) */
  int is_f16;           /* with elem_bytes 2: 1 for f16, 0 for bf16 */
  unsigned seed;
  float scale;          /* values in [-scale, scale) */
} RagdotFillParams;

#ifdef __CUDACC_RTC__
#define RAGDOT_FILL_FN __device__ __forceinline__
#else
#define RAGDOT_FILL_FN static inline
#endif

/* murmur3's 32-bit finalizer */
RAGDOT_FILL_FN unsigned ragdot_fill_mix(unsigned h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/* Element i of a fill with this seed: scale * (2 u - 1), u = (hash >> 8) / 2^24 in [0, 1). Every
   step is exact in f32 but the last product, which rounds the same way everywhere. */
RAGDOT_FILL_FN float ragdot_fill_value(unsigned seed, unsigned long long i, float scale) {
  const unsigned h =
      ragdot_fill_mix((unsigned)i ^ ragdot_fill_mix((unsigned)(i >> 32) ^ ragdot_fill_mix(seed + 0x9e3779b9u)));
  const float u = (float)(h >> 8) * 5.9604644775390625e-8f;
  const float centered = 2.0f * u - 1.0f;
  return scale * centered;
}

#endif
