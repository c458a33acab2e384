// A seeded micro classifier (character tokenizer over four short reviews, two
// encoder layers of four heads) saved as a task model file, with non-zero
// biases and norm parameters so that every term of the projections shows.
// Shared by the attribution tests of the library (tests/teach) and of
// `attn classify --explain` (tests/cli).
#pragma once

#include <attn/io/json.h>
#include <attn/models/text_classifier.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::testing {

inline const std::vector<std::string> kMicroTexts = {"这个东西质量很好，物流也快", "太差了，不会再买",
                                                     "房间干净，服务周到", "书的内容很一般"};

struct MicroModelCase {
  std::string name;
  bool pre_norm;
  models::Positions positions;
  int64_t kv_heads;
};

// Saves the model of `c` under the test temp folder as <prefix>_<pid>_<name>.attn; returns its path.
std::string save_micro_classifier(const MicroModelCase& c, const std::string& prefix);

// The ids the model reads for `text`: [CLS] + its characters.
std::vector<int64_t> micro_ids_of(models::TextClassifier& clf, const std::string& text);

// The numbers of a JSON array.
std::vector<double> json_numbers(const json::Value& a);

}  // namespace attn::testing
