// The stages of attention on a learner's own sentence in a real pretrained model, for the
// explainer page (`attn serve`'s /explain, `attn explain --stages`; docs/explainer.md):
//
//   tokens and pieces -> the layer's input rows -> Q, K, V of one head [N, d_k] -> QKᵀ -> ÷√d_k
//   -> the mask (padding; causal on a decoder; a sliding window where the layer has one)
//   -> softmax row by row -> weights × V -> every head side by side -> concatenation and W_O
//   -> residual and norm.
//
// Every number comes from the engine: the layer's input, Q, K, V and (decoders) the heads' outputs,
// W_O's product and the residual are the engine's own buffers (models::AttentionLayerTrace), or for
// the encoder (multilingual-e5-small) the engine's traced layer input times the model's own f32
// weights; the softmax shown is the attention kernel's captured probabilities, and the JSON holds the
// softmax recomputed in double from the scores beside it with their largest difference.
// Layers, heads and positions are numbered from 0.
#pragma once

#include <attn/io/json.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attn::models {
class TextClassifier;
}

namespace attn::teach {

struct StagesRequest {
  std::string text;
  int64_t layer = 0, head = 0;
  int64_t max_tokens = 64;  // a text with more tokens is refused (the page draws N × N grids)
  // The padding-mask view (encoder only): > 0 runs the sentence again in a batch of two with a second
  // row `pad` tokens longer (the sentence's own pieces repeated), so the sentence's row is padded by
  // `pad` positions; the document then has "padding" (docs/explainer.md). N + pad <= max_tokens.
  int64_t pad = 0;
};

// The named models of the explainer: "e5" (multilingual-e5-small, an encoder), "smollm2"
// (SmolLM2-135M-Instruct) and "gemma3" (Gemma 3 270M), decoders. Aliases: the full names.
inline const std::vector<std::string> kStageModels = {"e5", "smollm2", "gemma3"};

// A model kept loaded between requests. stages() runs the engine: one call at a time.
class StagesModel {
 public:
  // `name` one of kStageModels (or an alias); `path` an explicit file (as the other commands'
  // --model paths), "" to find the installed one. Throws attn::Error naming where it looked.
  static std::unique_ptr<StagesModel> load(const std::string& name, const std::string& path = "");
  virtual ~StagesModel() = default;
  // The stages as JSON (docs/explainer.md lists every field). Throws attn::Error for an empty text,
  // too many tokens, or a layer or head out of range (naming the valid range).
  virtual json::Value stages(const StagesRequest& request) = 0;
  virtual std::string name() const = 0;  // the model's full name
};

// The canonical name ("e5", "smollm2", "gemma3") of a name or alias; throws listing them.
std::string stage_model_key(const std::string& name);
// Which of kStageModels are installed here (found without loading), with their full names.
std::vector<std::pair<std::string, std::string>> installed_stage_models();

// "Attention is not causality" (issue 41): a review classifier (`attn train classify`, the e5
// fine-tune or the character model) on the same text: the last layer's attention of [CLS] (position 0),
// averaged over heads (and per head on request), beside integrated gradients of the predicted class's
// logit with respect to the token embeddings (models/attribution.h: Riemann midpoint rule on `steps`
// points; baseline [PAD] at every position, or zeros), with the completeness check
// Σ IG = f(x) − f(baseline) and Spearman's rank correlation between the attention and |IG| over the
// non-special tokens (the first token [CLS]/<s> and a piece tokenizer's last [SEP]/</s> left out).
struct CausalityRequest {
  std::string text;
  int64_t steps = 32;            // m, in [1, 256] (the midpoint rule; docs/explainer.md has its errors)
  std::string baseline = "pad";  // "pad" | "zeros"
  bool per_head = false;         // also every head's [CLS] row of the last layer
};
// The panel as JSON (fields in docs/explainer.md). Throws attn::Error for an empty text or bad options.
json::Value causality_panel(models::TextClassifier& classifier, const CausalityRequest& request);

struct StagesOptions {
  std::string model = "e5";
  std::string path;  // explicit model file
  StagesRequest request;
};
// StagesModel::load(model, path)->stages(request): `attn explain --stages --json`.
json::Value explain_stages(const StagesOptions& options);

// The same with the causality panel of a classifier file (`attn train classify`) on the same sentence
// (the document's "causality"; causality.text is ignored: the request's text is used).
json::Value explain_stages(const StagesOptions& options, const std::string& classifier,
                           const CausalityRequest& causality);

}  // namespace attn::teach
