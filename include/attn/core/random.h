// Portable pseudo-random numbers for the whole tree: data splits and epoch order,
// parameter initialisation (nn::InitRng), sampling (models::generate), training
// seeds (train::TrainRng), hashes for cache keys and checksums.
//
// The same seed gives the same numbers on every machine and compiler: the
// generator is xoshiro256** (Blackman and Vigna) seeded through splitmix64,
// bounded integers use Lemire's multiply-and-reject method (unbiased), and
// shuffle() is Fisher-Yates on top of it. std::shuffle and
// std::uniform_int_distribution are avoided on purpose: their algorithms are
// implementation-defined, so a split made with them can differ between
// standard libraries.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace attn {

// One step of splitmix64: advances `state` and returns the next output.
uint64_t splitmix64(uint64_t& state);

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next();             // 64 uniform bits
  uint64_t below(uint64_t n);  // uniform in [0, n); n must be > 0
  double uniform();            // uniform in [0, 1), 53 bits

  // Fisher-Yates: every permutation equally likely.
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(below(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  uint64_t s_[4];
};

// Mixes several 64-bit values into one seed (e.g. base seed and epoch).
uint64_t mix_seed(uint64_t a, uint64_t b);

// 64-bit FNV-1a; chain calls by passing the previous hash.
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnvOffset);

}  // namespace attn
