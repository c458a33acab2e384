// Internals of `attn quiz`, shared by its files:
//   quiz.cc            options, --help, the modes (interactive, --answers, --json, --print-answers)
//   quiz_generate.cc   the seeded generator: kinds, topics, random numbers
//   quiz_numeric.cc    numeric questions: softmax weights, scaled scores, √d_k saturation
//   quiz_structure.cc  structure questions: masks, cross-attention, parameters and FLOPs,
//                      encoder/decoder, where a classifier reads its label
//   quiz_path.cc       path length: RNN against self-attention (full and windowed)
//   quiz_check.cc      reading and checking an answer
// Every expected answer is computed: by the engine (attn::attention with weight
// capture, masks, log-sum-exp) and cross-checked against plain arithmetic, or
// by arithmetic from the stated formula. Nothing is written by hand except the
// bank of facts behind the multiple-choice questions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "explain_internal.h"  // fmt, with_commas, join_words (shared text helpers)
#include "json.h"

namespace attn::cli::quiz {

enum class Kind { numeric, structure, path };
const char* kind_name(Kind k);
// "numeric" | "structure" | "path" -> the kind; "all" -> nullopt. Throws otherwise.
std::optional<Kind> parse_kind(const std::string& s);

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

enum class Form {
  number,     // a decimal number within abs_tol (or rel_tol of the expected value)
  positions,  // a set of 1-based positions: "1-4", "2,3,5", "3"
  choice,     // a letter a, b, c... or the text of a choice (or one of its aliases)
};

struct Choice {
  std::string text;
  std::vector<std::string> aliases;  // other accepted answers, lower case ("encoder")
};

struct Question {
  Kind kind = Kind::numeric;
  std::string topic;  // e.g. "softmax-weight"
  std::string text;   // the question as a person reads it (may hold '\n')
  Form form = Form::number;

  double number = 0;   // Form::number: the exact expected value
  double abs_tol = 0;  // accepted |answer - number| (0: see rel_tol)
  double rel_tol = 0;  // accepted |answer - number| / |number|
  int decimals = 2;    // digits of the key

  std::vector<int64_t> positions;  // Form::positions: sorted, 1-based
  int64_t max_position = 0;        // answers must lie in [1, max_position]

  std::vector<Choice> choices;  // Form::choice
  int answer = -1;              // index into choices

  std::string solution;        // the worked solution (may hold '\n')
  Json data = Json::object();  // the question's inputs, for --json

  // The expected answer as text that check() accepts ("0.24", "1-4", "b").
  std::string key() const;
  // How to answer and the tolerance, e.g. "a number; right within ±0.01".
  std::string how_to_answer() const;
  std::string tolerance_text() const;  // "±0.01", "within 0.1%", "exact"
  Json expected_json() const;
};

// `count` questions of `kind` (all kinds in turn when nullopt) from `seed`.
std::vector<Question> generate(std::optional<Kind> kind, int64_t count, uint64_t seed);

// The generators of each kind; each draws from `rng` and fills one question.
Question numeric_question(Rng& rng);
Question structure_question(Rng& rng);
Question path_question(Rng& rng);

struct Verdict {
  bool valid = false;    // the answer could be read
  bool correct = false;  // ... and is right
  std::string error;     // why it could not be read (when !valid)
};
// Reads `answer` in the question's form and compares it with the expected
// answer. Never throws: a malformed answer gives valid = false and a message.
Verdict check(const Question& q, const std::string& answer);

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

// "1-4", "2, 5-6" from sorted 1-based positions.
std::string positions_text(const std::vector<int64_t>& p);
// "[1.2, -0.3, 0.8]" with each value in `decimals` digits.
std::string list_text(const std::vector<double>& v, int decimals);
// Fixed-point text, never "-0.00" (explain's helper).
inline std::string fixed(double v, int decimals) { return explain::fmt(v, decimals); }
using explain::with_commas;
// Indents every line of `s` by `indent`.
std::string indent_lines(const std::string& s, const std::string& indent);

}  // namespace attn::cli::quiz
