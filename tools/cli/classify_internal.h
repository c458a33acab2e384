// Shared by `attn train classify` (classify_train.cc) and `attn classify`
// (classify.cc): where the reviews are, atomic file writes, and the printing of
// one classified text (label, probability, what [CLS] attended to). The
// printing functions take a Classification and return text, so other commands
// (e.g. an --explain mode) can reuse and extend them.
#pragma once

#include <attn/io/json.h>
#include <attn/models/text_classifier.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::cli::classify {

// The folder that holds reviews-zh/pos.txt and neg.txt: $ATTN_DATA_DIR, else
// ../shared/data (from the working directory), else <repo>/../shared/data and
// <repo>/data (the repository found above the attn binary). Throws attn::Error
// naming every place looked at and scripts/fetch-reviews.sh when none has them.
std::string find_reviews_dir();

struct PrintOptions {
  int64_t top = 5;     // characters listed per layer (and per head)
  bool heads = false;  // also per head
};

// The characters [CLS] attended to most in one layer: indices into c.tokens
// (never [CLS] itself), sorted by weight, at most `top`. `head` < 0: the mean over heads.
std::vector<int64_t> top_attended(const models::Classification& c, int64_t layer, int64_t head, int64_t top);
// The head-averaged attention of [CLS] in one layer, per token.
std::vector<double> mean_over_heads(const models::Classification& c, int64_t layer);

// Human-readable block for one text:
//   text  这个东西质量很好
//   label pos (p = 0.973)
//   layer 1 (mean of 4 heads): 好 0.21  质 0.12 ...
std::string format_classification(const std::string& text, const models::Classification& c,
                                  const std::vector<std::string>& labels, const PrintOptions& options);
// The same as JSON: {"text", "label", "probability", "probabilities": {...}, "tokens": [...],
//   "truncated", "attention": [{"layer", "mean": [...], "top": [...], "heads": [[...], ...]}]}
json::Value classification_json(const std::string& text, const models::Classification& c,
                                const std::vector<std::string>& labels, const PrintOptions& options);

}  // namespace attn::cli::classify
