// Internals of the quiz (attn/teach/quiz.h), shared by its files:
//   quiz.cc            the quiz, its texts (questions, results, the key) and its JSON; answers files
//   quiz_generate.cc   the seeded generator: kinds, topics, random numbers
//   quiz_numeric.cc    numeric questions: softmax weights, scaled scores, √d_k saturation
//   quiz_structure.cc  structure questions: masks, cross-attention, parameters and FLOPs,
//                      encoder/decoder, where a classifier reads its label
//   quiz_path.cc       path length: RNN against self-attention (full and windowed)
//   quiz_claim.cc      yes/no claims: multi-head cost, a softmax table, what a causal mask shows
//   quiz_check.cc      reading and checking an answer
// Every expected answer is computed: by the engine (attn::attention with weight
// capture, masks, log-sum-exp) and cross-checked against plain arithmetic, or
// by arithmetic from the stated formula. Nothing is written by hand except the
// bank of facts behind the multiple-choice questions.
#pragma once

#include <attn/teach/quiz.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "explain_internal.h"  // fmt, with_commas, join_words, jv (shared helpers)

namespace attn::teach::quiz {

// The seeded random stream (SplitMix64): same seed, same questions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();                       // [0, 1)
  int64_t range(int64_t lo, int64_t hi);  // uniform in [lo, hi]
  double normal();                        // mean 0, variance 1 (Box-Muller)
  // Uniform in [lo, hi] rounded to `decimals` digits (never -0).
  double rounded(double lo, double hi, int decimals);
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  uint64_t state_;
};

// The generators of each kind; each draws from `rng` and fills one question in
// `lang` (the draws never depend on `lang`).
Question numeric_question(Rng& rng, Lang lang);
Question structure_question(Rng& rng, Lang lang);
Question path_question(Rng& rng, Lang lang);
// A yes/no claim (structure topic "claim", quiz_claim.cc).
Question claim_question(Rng& rng, Lang lang);

// A choice shown as `en` or `zh`, accepting both texts and every alias in either language.
Choice choice(Lang lang, const std::string& en, const std::string& zh, std::vector<std::string> aliases = {});

// ---- helpers shared by the generators ------------------------------------------

// Shuffles q.choices with `rng`, keeping q.answer on the right choice.
void shuffle_choices(Question& q, Rng& rng);

// softmax(scale · scores) by the engine: attn::attention (reference backend,
// fp64) on q = scores [1, 1, 1, n], k = identity [1, 1, n, n], weights captured;
// cross-checked against exp/sum computed here (throws if they differ).
std::vector<double> engine_softmax(const std::vector<double>& scores, double scale);
// Which keys query `row` (0-based) may see under `causal`/window/alignment, by
// the engine: all-zero q, k, v, weights captured; visible iff weight > 0.
struct MaskSpec {
  int64_t lq = 0, lk = 0;
  bool causal = false;
  bool bottom_right = false;
  int64_t window_left = -1, window_right = -1;  // -1: unbounded
};
std::vector<bool> engine_visible(const MaskSpec& m, int64_t row);

// "0-3", "1,4-5" from sorted positions.
std::string positions_text(const std::vector<int64_t>& p);
// "[1.2, -0.3, 0.8]" with each value in `decimals` digits.
std::string list_text(const std::vector<double>& v, int decimals);
// Fixed-point text, never "-0.00" (explain's helper).
inline std::string fixed(double v, int decimals) { return teach::fmt(v, decimals); }
using teach::with_commas;
// Indents every line of `s` by `indent`.
std::string indent_lines(const std::string& s, const std::string& indent);

}  // namespace attn::teach::quiz
