// Attribution of an EncoderClassifier's prediction to its input tokens: what
// CHANGES the answer, to be shown next to what the model LOOKS AT (the [CLS]
// attention). A high attention weight is not a cause: a token can receive most
// of the attention and still not matter (for instance when its value vector is
// zero), and a token with little attention can decide the class.
//
// f(e) is the logit of the target class (before softmax) as a function of the
// token embeddings e: [L, C] (EncoderClassifier::embed_tokens: the table row,
// times sqrt(d_model) when the model scales embeddings; positions are added
// inside the model and are NOT attributed, they stay fixed).
//
//   input × gradient   a_i = Σ_c e_ic · ∂f/∂e_ic               (signed)
//                      n_i = ‖e_i ⊙ ∂f/∂e_i‖₂                   (the L2-norm variant, >= 0)
//   integrated grads   IG_i = Σ_c (e_ic − b_ic) · ∫₀¹ ∂f/∂e_ic (b + α(e − b)) dα
//                      the integral by the trapezoid rule on m + 1 points α_k = k/m (the
//                      default), or the Riemann midpoint rule on m points α_k = (k + ½)/m
//                      (AttributionRule::midpoint; f(e) and f(b) then come from two more
//                      points of weight 0), batched over the points. Completeness: Σ_i IG_i = f(e) − f(b) in
//                      the limit; the error Σ_i IG_i − (f(e) − f(b)) is reported so the
//                      user can see convergence (raise m while it is large).
//
// Baselines b: `pad` (default): every position holds the [PAD] token's embedding
// (pad_id of the config), positions unchanged; `zeros`: all token embeddings zero.
// AttributionOptions::keep lists positions whose baseline row is the input's own token (the special
// tokens [CLS] / <s> and [SEP] / </s>, as the BERT integrated-gradients recipes build the reference):
// they stay fixed along the path, so their IG is exactly 0. teach::attribute_prediction keeps them. Why:
// on e5 fine-tunes, moving </s> from [PAD] to </s> makes its hidden state switch regime (a channel of
// the end-of-sequence state turns on in layers 4-10) within ~0.0005 of alpha; the integrand then has a
// spike ~0.2 of f(e) - f(b) in area that no m <= 256 resolves (errors of several per cent that change
// sign with m). With the special tokens kept the path is smooth and the midpoint rule converges as 1/m²
// (docs/attribution.md, bench/attribution_bench.cc).
//
// Gradients come from the autograd engine (include/attn/core/autograd.h) through
// the fused attention backward. The model is run in eval mode (no dropout) and its
// parameters' .grad are left untouched.
#pragma once

#include <attn/models/transformer.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::models {

enum class AttributionBaseline { pad, zeros };
// How ∫₀¹ is sampled: trapezoid on α = k/m (k = 0..m) or midpoint on α = (k + ½)/m (k = 0..m-1).
enum class AttributionRule { trapezoid, midpoint };

const char* baseline_name(AttributionBaseline b);
// "pad" or "zeros"; throws attn::Error naming the choices.
AttributionBaseline parse_baseline(const std::string& s);
const char* rule_name(AttributionRule r);  // "trapezoid" or "midpoint"

struct AttributionOptions {
  int64_t target = -1;  // the class to explain; -1 = the predicted class
  int64_t steps = 32;   // integrated gradients: m intervals (m + 1 points); >= 1
  int64_t batch = 16;   // points per forward/backward batch; >= 1
  AttributionBaseline baseline = AttributionBaseline::pad;
  AttributionRule rule = AttributionRule::trapezoid;
  // Positions in [0, L) held at the input's token embedding in the baseline (IG 0 there); empty = none.
  std::vector<int64_t> keep;
};

struct Attribution {
  int64_t target = 0;                        // the explained class
  int64_t predicted = 0;                     // argmax of the logits
  std::vector<double> logits;                // [classes] of the input
  std::vector<double> probs;                 // [classes] softmax of logits
  std::vector<double> input_x_grad;          // [L] Σ_c e·∂f/∂e per token
  std::vector<double> input_x_grad_norm;     // [L] ‖e ⊙ ∂f/∂e‖₂ per token
  std::vector<double> integrated_gradients;  // [L]
  int64_t steps = 0;
  AttributionBaseline baseline = AttributionBaseline::pad;
  AttributionRule rule = AttributionRule::trapezoid;
  std::vector<int64_t> kept;      // the positions the baseline kept (AttributionOptions::keep, sorted)
  double f_input = 0;             // f(e): the target logit of the input (from the IG batch, α = 1)
  double f_baseline = 0;          // f(b)
  double ig_sum = 0;              // Σ_i IG_i
  double completeness_error = 0;  // ig_sum − (f_input − f_baseline)
  // [layers][L]: the [CLS] row of each layer's attention, averaged over heads (exact captured weights).
  std::vector<std::vector<double>> cls_attention;
  // [H][L]: the last layer's [CLS] row per head (the same capture).
  std::vector<std::vector<double>> cls_attention_heads;
};

// ids: the L token ids of one input, position 0 is [CLS] (1 <= L <= max_len).
// Throws attn::Error for bad ids, a target outside [0, classes), steps or batch < 1, a kept position
// outside [0, L).
Attribution attribute(EncoderClassifier& model, const std::vector<int64_t>& ids,
                      const AttributionOptions& options = {});

// Spearman's rank correlation of a and b (same length >= 2; ties get their
// average rank). 0 when either has no spread (all values equal).
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace attn::models
