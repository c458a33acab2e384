// The generation models of `attn serve` (serve/gen_model.h).
#include "serve/gen_model.h"

#include <attn/core/error.h>
#include <attn/models/text_decoder.h>
#include <attn/viz/attention.h>

namespace attn::serve::detail {
namespace {

// Every architecture the runtime's decoder reads (SmolLM2's llama, gemma3, qwen2, qwen3, phi3, gemma2).
class DecoderGen final : public GenModel {
 public:
  explicit DecoderGen(models::TextDecoder m) : m_(std::move(m)) {}
  models::runtime::BatchDecoder& decoder() override { return m_.decoder(); }
  std::string architecture() const override { return m_.config().arch; }
  int64_t capacity() const override { return m_.capacity(); }
  int64_t layers() const override { return m_.config().layers; }
  int64_t heads() const override { return m_.config().heads; }
  text::TextPieces chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns) const override {
    return m_.chat_pieces(turns, true);
  }
  std::vector<int32_t> encode(const text::TextPieces& pieces) const override { return m_.encode(pieces); }
  std::vector<int32_t> encode_text(const std::string& text) const override { return m_.encode_text(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return m_.decode(ids); }
  void set_stop_tokens(models::GenerateOptions& g) const override { m_.set_stop_tokens(g); }
  viz::Export attention(const std::vector<int32_t>& ids, const std::string& model_id,
                        const std::string& text) override {
    return viz::export_decoder_attention(m_, ids, model_id, text);
  }

 private:
  models::TextDecoder m_;
};

}  // namespace

std::unique_ptr<GenModel> load_gen_model(const std::string& name, int64_t context,
                                         const std::string& quantize, std::string* id) {
  const models::runtime::LoadQuant quant =
      quantize.empty() ? models::runtime::LoadQuant::none : models::runtime::parse_load_quant(quantize);
  const models::DecoderModelName m = models::resolve_decoder_model(name);
  models::TextDecoderOptions o;
  o.max_context = context;
  o.quantize = quant;
  o.greedy_screen_at_load = true;  // every request's greedy picks screened from the first
  *id = m.id;
  return std::make_unique<DecoderGen>(models::TextDecoder::load(m.path, o));
}

}  // namespace attn::serve::detail
