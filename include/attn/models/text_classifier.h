// A trained text classifier with its tokenizer and labels: the model of
// `attn train classify` and `attn classify`.
//
// Input: [CLS] followed by the first max_len - 1 tokens of the text
// (CharTokenizer: one token per CJK character or punctuation mark); tokens
// that are not in the vocabulary become [UNK]. The EncoderClassifier reads the
// final vector of [CLS] and outputs one logit per class; probabilities are the
// softmax of the logits (computed in double).
//
// Saved as one task model file (task_model.h) with task "classify" whose data is
//   {"vocab": [token per id], "labels": [class names], "max_len": 100,
//    "tokenizer": {"kind": "char", "group_ascii_alnum", "keep_spaces",
//                  "fullwidth_to_ascii", "lowercase_ascii"},
//    ... anything the caller adds (split, data counts) under other keys}.
#pragma once

#include <attn/io/json.h>
#include <attn/models/transformer.h>
#include <attn/text/tokenizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::models {

inline constexpr const char* kClassifyTask = "classify";

// One classified text.
struct Classification {
  int32_t label = -1;          // argmax class id
  std::vector<double> probs;   // [classes]
  std::vector<double> logits;  // [classes]
  // "[CLS]" then the tokens the model read, as written in the text (an
  // out-of-vocabulary token keeps its text; `unknown` marks it).
  std::vector<std::string> tokens;
  std::vector<bool> unknown;  // per token: mapped to [UNK]
  int64_t text_tokens = 0;    // tokens of the whole text, before cutting
  bool truncated = false;     // text_tokens > max_len - 1
  // When requested: attention of [CLS] per layer and head over `tokens`
  // ([layers][heads][tokens.size()]), the exact weights of the attention kernel.
  std::vector<std::vector<std::vector<double>>> attention;
};

class TextClassifier {
 public:
  // The config's src_vocab must equal the tokenizer's vocabulary size and
  // num_classes the number of labels; max_len <= config.max_len.
  TextClassifier(const TransformerConfig& config, text::CharTokenizer tokenizer,
                 std::vector<std::string> labels, int64_t max_len);

  // Reads a task model file of task "classify" (another task is an error naming both).
  static std::unique_ptr<TextClassifier> load(const std::string& path);
  // Writes the model file atomically; `extra` (an object or null) adds members to its data.
  void save(const std::string& path, const json::Value& extra = json::Value()) const;
  // The data object save() writes (without extras).
  json::Value data_json() const;

  EncoderClassifier& model() { return *model_; }
  const EncoderClassifier& model() const { return *model_; }
  const text::CharTokenizer& tokenizer() const { return tokenizer_; }
  const std::vector<std::string>& labels() const { return labels_; }
  int64_t max_len() const { return max_len_; }

  // Classifies `texts` in batches (eval mode: no dropout). attention: fill
  // Classification::attention. An empty text (after normalisation) is an error.
  std::vector<Classification> classify(const std::vector<std::string>& texts, bool attention = false,
                                       int64_t batch_size = 32);

 private:
  text::CharTokenizer tokenizer_;
  std::vector<std::string> labels_;
  int64_t max_len_;
  std::unique_ptr<EncoderClassifier> model_;
};

// Tokenizer options <-> the "tokenizer" JSON object above.
json::Value char_tokenizer_options_json(const text::CharTokenizerOptions& o);
text::CharTokenizerOptions char_tokenizer_options_from_json(const json::Value& v);

}  // namespace attn::models
