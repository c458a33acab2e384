// A request's decoding options and the stop tokens of a vocabulary (include/attn/models/generate.h):
// one place for the CLI, the Python package and the server, whatever the model.
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/decoder_tokenizer.h>
#include <attn/text/spm.h>

#include <algorithm>

namespace attn::models {

GenerateOptions request_options(int64_t max_new_tokens, double temperature, int64_t top_k, double top_p) {
  ATTN_CHECK(temperature >= 0, "temperature must be >= 0 (0 = greedy); got ", temperature);
  GenerateOptions g;
  g.max_new_tokens = max_new_tokens;
  g.search = temperature > 0 ? SearchKind::sample : SearchKind::greedy;
  g.temperature = temperature > 0 ? temperature : 1.0;
  g.top_k = top_k;
  g.top_p = top_p;
  return g;
}

void set_stop_tokens(GenerateOptions& g, const text::ByteBpeTokenizer& tok) {
  g.eos_id = tok.eos_id();
  g.stop_ids.clear();
  const auto& types = tok.vocab().types;
  for (std::size_t id = 0; id < types.size(); ++id)
    if (types[id] == text::BpeTokenType::control && static_cast<int64_t>(id) != g.eos_id)
      g.stop_ids.push_back(static_cast<int64_t>(id));
}

void set_stop_tokens(GenerateOptions& g, const text::SpmTokenizer& tok) {
  g.eos_id = tok.eos_id();
  g.stop_ids.clear();
  for (int64_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.type(static_cast<int32_t>(id)) == text::SpmTokenType::control && id != g.eos_id)
      g.stop_ids.push_back(id);
}

void set_stop_tokens(GenerateOptions& g, const text::DecoderTokenizer& tok) {
  g.eos_id = tok.eos_id();
  g.stop_ids.clear();
  for (int64_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.is_control(static_cast<int32_t>(id)) && id != g.eos_id) g.stop_ids.push_back(id);
}

bool is_stop_token(const GenerateOptions& g, int64_t id) {
  return (g.eos_id >= 0 && id == g.eos_id) ||
         std::find(g.stop_ids.begin(), g.stop_ids.end(), id) != g.stop_ids.end();
}

}  // namespace attn::models
