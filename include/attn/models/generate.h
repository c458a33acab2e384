// Autoregressive decoding: greedy search, beam search with a length penalty,
// and top-k / top-p (nucleus) sampling with a temperature. One loop (per
// search kind) drives every decoder through one step interface (feed a token
// per row, get logits; the KV cache behind it):
//
//   EncoderDecoder: source ids -> target ids (the decoder starts from bos_id)
//   DecoderLM:      prompt ids -> continuation ids
//
// Inputs are batched and may differ in length. Every step runs the whole
// batch through the model's KV cache (nn::DecoderCache); sequences that have
// finished (stop token or max_new_tokens) are removed from the batch and from
// the cache, so they stop costing compute. Beam search runs B × beam rows and
// reorders the cache rows after each step (nn::DecoderCache::select_rows).
//
// DecoderLM prompts of different lengths: the shortest common prefix length
// P_min is prefilled in one call; afterwards every row advances one position
// per step, rows still inside their prompt are fed their next prompt token
// (teacher forcing) and rows past it their last generated token. So each row
// sees exactly the positions and keys it would see alone (no padding), and the
// batched result equals decoding each prompt on its own.
// EncoderDecoder sources of different lengths are right-padded and masked in
// the encoder and in cross-attention (src_lengths).
//
// Scores (documented formulas in docs/generation.md):
//   log_prob = Σ_t log softmax(logits_t)[y_t] under the model (temperature 1,
//              no top-k/top-p), including the stop token when one was produced.
//   score    = log_prob / lp(n), n = generated tokens including the stop token;
//              lp(n) = ((5 + n) / 6)^α (LengthPenalty::gnmt, Wu et al. 2016) or
//              n^α (LengthPenalty::power); α = 0 gives score = log_prob.
//              Greedy and sampling report score = log_prob.
// Beam search keeps `beam` live hypotheses per source and up to `beam`
// finished ones; it stops a source only when no live hypothesis can still beat
// the worst kept finished one (bound: log_prob only decreases, lp(n) ≤
// lp(max_new_tokens)), so with a beam as wide as the search space it is exact.
//
// Sampling draws from softmax(logits / temperature) restricted to the top_k
// largest logits and then to the smallest set of most probable tokens whose
// probability sums to ≥ top_p (renormalised). Each source b has its own
// generator Rng(mix_seed(seed, b)), so results are portable and
// reproducible for a given seed and batch order.
//
// Bad options or input throw attn::Error naming the expected and actual values.
#pragma once

#include <attn/core/random.h>
#include <attn/core/tensor.h>
#include <attn/models/transformer.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace attn::text {
class ByteBpeTokenizer;
class SpmTokenizer;
class DecoderTokenizer;
}  // namespace attn::text

namespace attn::models {

enum class SearchKind { greedy, beam, sample };
enum class LengthPenalty { gnmt, power };

struct GenerateOptions {
  SearchKind search = SearchKind::greedy;
  int64_t max_new_tokens = 64;  // also capped so that the decoder never runs past max_len
  int64_t bos_id = 4;  // EncoderDecoder: first decoder input (text::Vocab::kBos); unused by DecoderLM
  int64_t eos_id = 5;  // stops a sequence (text::Vocab::kEos); -1 = none
  std::vector<int64_t> stop_ids;  // further stop tokens

  // Beam search.
  int64_t beam = 4;
  double length_alpha = 0.6;  // α of the length penalty (0: none)
  LengthPenalty length_penalty = LengthPenalty::gnmt;
  int64_t num_return = 1;  // hypotheses returned per source (≤ beam), best first

  // Sampling.
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0 = all tokens
  double top_p = 1.0;        // in (0, 1]
  uint64_t seed = 0;

  // EncoderDecoder: record the cross-attention of the last decoder layer,
  // averaged over heads, for every generated token (Generated::cross_attention).
  bool capture_cross_attention = false;
};

struct Generated {
  int64_t source = 0;        // index of the source / prompt this belongs to
  std::vector<int64_t> ids;  // generated tokens, without bos, prompt and the stop token
  int64_t stop_token = -1;   // the stop token that ended the sequence; -1: length limit
  double log_prob = 0.0;     // see above (includes the stop token)
  double score = 0.0;        // beam: log_prob / lp(n); otherwise log_prob
  // [steps, Ls] f32 when capture_cross_attention (EncoderDecoder only): row t is
  // the attention of the decoder query that predicted token t (ids, then the
  // stop token if any), head-averaged, over the source positions (padding
  // excluded: Ls is this source's own length).
  Tensor cross_attention;
};

// Called for each new token as soon as it is chosen (greedy and sampling
// only; beam search throws if one is given): (source index, token id).
// Stop tokens are not reported.
using TokenCallback = std::function<void(int64_t source, int64_t token)>;

// sources: B token-id sequences (each 1..max_len tokens, ids < src_vocab).
// Returns num_return results per source (beam search: at most num_return,
// fewer only when fewer hypotheses exist), grouped by source in input order (best first
// within a source). The model is used in eval mode under NoGradGuard and left
// in the mode it was in.
std::vector<Generated> generate(EncoderDecoder& model, const std::vector<std::vector<int64_t>>& sources,
                                const GenerateOptions& options, const TokenCallback& on_token = {});

// prompts: B non-empty token-id sequences (each shorter than max_len).
std::vector<Generated> generate(DecoderLM& model, const std::vector<std::vector<int64_t>>& prompts,
                                const GenerateOptions& options, const TokenCallback& on_token = {});

// The length penalty lp(n) above.
// A request's decoding options, one place for the CLI, the Python package and the server: greedy
// when temperature is 0, else sampling at that temperature with top_k (0 = all) and top_p.
GenerateOptions request_options(int64_t max_new_tokens, double temperature, int64_t top_k, double top_p);
// The stop tokens of a vocabulary, one place for every model: its eos and every other control token
// (ChatML's <|im_end|>, Gemma's <end_of_turn>), set as g.eos_id and g.stop_ids.
void set_stop_tokens(GenerateOptions& g, const text::ByteBpeTokenizer& tok);
void set_stop_tokens(GenerateOptions& g, const text::SpmTokenizer& tok);
void set_stop_tokens(GenerateOptions& g, const text::DecoderTokenizer& tok);
// True when `id` ends a reply under those stop tokens.
bool is_stop_token(const GenerateOptions& g, int64_t id);

double length_penalty(int64_t n, double alpha, LengthPenalty kind);

// The sampling distribution of one row of logits (exposed for tests): the
// probabilities after temperature, top-k and top-p, renormalised; tokens cut
// off get exactly 0. logits: [V].
std::vector<double> sampling_distribution(const float* logits, int64_t V, double temperature, int64_t top_k,
                                          double top_p);

// One token drawn from sampling_distribution() with one rng.uniform() (the
// sampler of generate(), also used by the GGUF models' CLI). logits: [V].
int64_t sample_token(const float* logits, int64_t V, double temperature, int64_t top_k, double top_p,
                     Rng& rng);

}  // namespace attn::models
