// The attribution report of one classified text (`attn classify --explain`,
// `attn attribute`): per token, the attention [CLS] pays (head-averaged: the last
// layer and the mean over layers) next to the attribution of the prediction
// (integrated gradients and input × gradient, models/attribution.h), sorted by
// |IG|, with Spearman's rank correlation between the two and a reminder that
// attention is not explanation. Also as JSON and as a viewer export (attn view)
// that carries the attribution.
#pragma once

#include <attn/io/json.h>
#include <attn/models/attribution.h>

#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "view_internal.h"

namespace attn::models {
class TextClassifier;
struct Classification;
}  // namespace attn::models

namespace attn::cli::attrib {

struct Input {
  std::string text;                 // the text as given
  std::vector<std::string> tokens;  // "[CLS]" then the tokens the model read
  std::vector<int64_t> ids;         // their ids (same length)
  std::vector<std::string> labels;  // class names
  bool truncated = false;           // the text was cut to the model's max_len
};

struct Options {
  models::AttributionOptions attribution;
  std::string target;  // class name to explain; "" = the predicted class
};

struct Result {
  models::Attribution a;
  std::vector<double> attention_last;  // [L] [CLS] attention, last layer, mean over heads
  std::vector<double> attention_mean;  // [L] the same averaged over layers
  // Spearman over the tokens without [CLS] (0 when fewer than 2 such tokens):
  double rho_last_ig = 0, rho_mean_ig = 0, rho_last_ixg = 0;
};

// Runs the attribution (the target given by name is resolved against input.labels).
Result run(models::EncoderClassifier& model, const Input& input, const Options& options);

// The table and the explanation for people (UTF-8, aligned by display width).
std::string format_report(const Input& input, const Result& r);
// The same numbers as a JSON object.
json::Value report_json(const Input& input, const Result& r);
// A viewer export: every layer's full self-attention [1, H, L, L] (exact captured
// weights) and the attribution (methods "ig", "input_x_grad", "input_x_grad_norm").
view::Export make_export(models::EncoderClassifier& model, const Input& input, const Result& r,
                         const std::string& model_name);

// The input of one classified text: [CLS] + the tokens the model read, with their ids.
Input input_of(const models::TextClassifier& model, const std::string& text, const models::Classification& c);

// `attn classify --explain`: the options it adds to `attn classify`, and the run
// (after the classification itself) for the texts and their results.
const std::vector<OptionSpec>& explain_options();
int run_classify_explain(models::TextClassifier& model, const std::string& model_path,
                         const std::vector<std::string>& texts,
                         const std::vector<models::Classification>& results, const Args& opts);

// The sentence shown with every report.
extern const char* const kNotExplanation;

}  // namespace attn::cli::attrib
