// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): the value for counter c
// depends only on (seed, c), so dropout masks and data shuffles can be regenerated anywhere
// without storing them. Portable scalar code: data pipelines include this header too, and the
// CUDA kernels (kernels/cuda/) call the same functions on the device, so both backends draw
// identical masks.
#pragma once

#include <array>
#include <cstdint>

#ifdef __CUDACC__
#define KOLO_RNG_FN __host__ __device__ inline
#else
#define KOLO_RNG_FN inline
#endif

namespace kolo::trainer::rng {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // key schedule (golden ratio, sqrt 3)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

// One Philox4x32-10 block: four 32-bit outputs for a 128-bit counter and a 64-bit key.
KOLO_RNG_FN std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr,
                                               std::array<uint32_t, 2> key) {
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kPhiloxW0;
    key[1] += kPhiloxW1;
  }
  return ctr;
}

// The 32 random bits of stream position `index` under `seed`: position i is output i % 4 of
// the block whose counter is i / 4, so four consecutive positions share one Philox call.
KOLO_RNG_FN uint32_t bits(uint64_t seed, uint64_t index) {
  const uint64_t block = index >> 2;
  const auto out =
      philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0},
                 {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return out[index & 3];
}

// Uniform in [0, 1) with 24 random bits (exactly representable in float).
KOLO_RNG_FN float bits_to_uniform(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}
KOLO_RNG_FN float uniform(uint64_t seed, uint64_t index) {
  return bits_to_uniform(bits(seed, index));
}

}  // namespace kolo::trainer::rng
