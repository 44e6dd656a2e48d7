// The data pipeline's random numbers: SplitMix64 seeding a xoshiro256** generator, plus the
// helpers the pipelines need (bounded integers, unit doubles, Fisher-Yates shuffle). Written out
// here rather than taken from <random> so a seed gives the same masks and orders everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace kolo::trainer {

// SplitMix64 (Steele, Lea, Flood 2014): expands one 64-bit seed into well-mixed state words.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman, Vigna 2018).
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& word : state_) word = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, bound) by Lemire's multiply-shift; the bias (< bound / 2^64) does not matter
  // for shuffles and masks of data sets this size. bound must be > 0.
  uint64_t below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

// Fisher-Yates shuffle driven by Rng (std::shuffle's algorithm is implementation-defined).
template <typename T>
void shuffle(std::vector<T>& items, Rng& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

// One well-mixed seed from several words (base seed, epoch, batch index ...).
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0) {
  uint64_t state = a;
  state = splitmix64(state) ^ b;
  state = splitmix64(state) ^ c;
  return splitmix64(state);
}

}  // namespace kolo::trainer
