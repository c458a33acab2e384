// The attribution report of one classified text (`attn classify --explain`):
// per token, the attention [CLS] pays (head-averaged: the last layer and the
// mean over layers) next to the attribution of the prediction (integrated
// gradients and input × gradient, models/attribution.h), sorted by |IG|, with
// Spearman's rank correlation between the two and a reminder that attention is
// not explanation. Positions are numbered from 0 ([CLS] is position 0).
#pragma once

#include <attn/io/json.h>
#include <attn/models/attribution.h>
#include <attn/teach/lang.h>
#include <attn/viz/export.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::models {
class EncoderClassifier;
class TextClassifier;
struct Classification;
}  // namespace attn::models

namespace attn::teach {

struct AttributionInput {
  std::string text;                 // the text as given
  std::vector<std::string> tokens;  // "[CLS]" then the tokens the model read
  std::vector<int64_t> ids;         // their ids (same length)
  std::vector<std::string> labels;  // class names
  bool truncated = false;           // the text was cut to the model's max_len
  // The special tokens' positions: 0 ([CLS] / <s>) and, for a pretrained tokenizer, the last (</s>).
  std::vector<int64_t> special;
};

// The input of one classified text: [CLS] + the tokens the model read, with their ids and which are special.
AttributionInput attribution_input(const models::TextClassifier& model, const std::string& text,
                                   const models::Classification& c);

struct AttributionReportOptions {
  models::AttributionOptions attribution;
  std::string target;    // class name to explain; "" = the predicted class
  Lang lang = Lang::en;  // the language of the report
  // The baseline keeps input.special at the input's own tokens (models::AttributionOptions::keep): the
  // path then moves only the text's tokens, and the integral converges (models/attribution.h says why).
  bool keep_special = true;
};

struct AttributionResult {
  models::Attribution a;
  std::vector<double> attention_last;  // [L] [CLS] attention, last layer, mean over heads
  std::vector<double> attention_mean;  // [L] the same averaged over layers
  // Spearman over the tokens without [CLS] (0 when fewer than 2 such tokens):
  double rho_last_ig = 0, rho_mean_ig = 0, rho_last_ixg = 0;
};

// Runs the attribution (a target given by name is resolved against input.labels).
AttributionResult attribute_prediction(models::EncoderClassifier& model, const AttributionInput& input,
                                       const AttributionReportOptions& options);

// The table and the explanation for people (UTF-8, aligned by display width), in `lang`
// (the numbers are the same in both).
std::string attribution_text(const AttributionInput& input, const AttributionResult& r, Lang lang = Lang::en);
// The same numbers as a JSON object.
json::Value attribution_json(const AttributionInput& input, const AttributionResult& r);

// A viewer export of the classified text: every layer's full self-attention
// [1, H, L, L] (the exact captured weights) and the attribution (methods "ig",
// "input_x_grad", "input_x_grad_norm"), checked by the export reader.
viz::Export attribution_export(models::EncoderClassifier& model, const AttributionInput& input,
                               const AttributionResult& r, const std::string& model_name);

// The sentence shown with every report (the JSON's "note" is always the English one).
extern const char* const kNotExplanation;
extern const char* const kNotExplanationZh;

}  // namespace attn::teach
