// The generation models of `attn serve` (serve/gen_model.h).
#include "serve/gen_model.h"

#include <attn/core/error.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>
#include <attn/models/llama.h>
#include <attn/models/llama_tuning.h>
#include <attn/models/text_decoder.h>
#include <attn/viz/attention.h>

namespace attn::serve::detail {
namespace {

class LlamaGen final : public GenModel {
 public:
  explicit LlamaGen(models::LlamaModel m) : m_(std::move(m)) {}
  models::runtime::BatchDecoder& decoder() override { return m_; }
  std::string architecture() const override { return "llama"; }
  int64_t capacity() const override { return m_.capacity(); }
  int64_t layers() const override { return m_.config().layers; }
  int64_t heads() const override { return m_.config().heads; }
  text::TextPieces chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns) const override {
    std::vector<models::LlamaModel::Message> msgs;
    for (const auto& [role, content] : turns) msgs.push_back({role, content});
    return m_.chat_template_pieces(msgs, true);
  }
  std::vector<int32_t> encode(const text::TextPieces& pieces) const override {
    return m_.tokenizer().encode(pieces);
  }
  std::vector<int32_t> encode_text(const std::string& text) const override {
    return m_.tokenizer().encode(text, false, true);
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    return m_.tokenizer().decode(ids, false);
  }
  void set_stop_tokens(models::GenerateOptions& g) const override {
    models::set_stop_tokens(g, m_.tokenizer());
  }
  viz::Export attention(const std::vector<int32_t>& ids, const std::string& model_id,
                        const std::string& text) override {
    return viz::export_llama_attention(m_.attention_weights(ids), model_id, text);
  }

 private:
  models::LlamaModel m_;
};

class Gemma3Gen final : public GenModel {
 public:
  explicit Gemma3Gen(models::Gemma3Model m) : m_(std::move(m)) {}
  models::runtime::BatchDecoder& decoder() override { return m_; }
  std::string architecture() const override { return "gemma3"; }
  int64_t capacity() const override { return m_.capacity(); }
  int64_t layers() const override { return m_.config().layers; }
  int64_t heads() const override { return m_.config().heads; }
  text::TextPieces chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns) const override {
    std::vector<models::Gemma3Model::Message> msgs;
    for (const auto& [role, content] : turns) msgs.push_back({role, content});
    return m_.chat_template_pieces(msgs, true);
  }
  std::vector<int32_t> encode(const text::TextPieces& pieces) const override {
    return m_.tokenizer().encode(pieces, m_.tokenizer().add_bos());
  }
  std::vector<int32_t> encode_text(const std::string& text) const override {
    return m_.tokenizer().encode(text, m_.tokenizer().add_bos(), true);
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return m_.tokenizer().decode(ids); }
  void set_stop_tokens(models::GenerateOptions& g) const override {
    models::set_stop_tokens(g, m_.tokenizer());
  }
  viz::Export attention(const std::vector<int32_t>& ids, const std::string& model_id,
                        const std::string& text) override {
    return viz::export_gemma3_attention(m_.attention_weights(ids), model_id, text, m_.config().window);
  }

 private:
  models::Gemma3Model m_;
};

// Any other architecture the runtime's decoder reads (qwen2, qwen3, phi3, gemma2, a llama file too).
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

std::string file_id(const std::string& path) {
  std::string id = path;
  while (id.size() > 1 && id.back() == '/') id.pop_back();
  const std::size_t slash = id.find_last_of('/');
  if (slash != std::string::npos) id = id.substr(slash + 1);
  if (id.size() > 5 && id.compare(id.size() - 5, 5, ".gguf") == 0) id.resize(id.size() - 5);
  return id;
}

}  // namespace

std::unique_ptr<GenModel> load_gen_model(const std::string& name, int64_t context,
                                         const std::string& quantize, std::string* id) {
  const bool smollm = name == "smollm2" || name == "SmolLM2-135M-Instruct";
  const bool gemma = name == "gemma3" || name == "gemma-3-270m" || name == "Gemma-3-270M";
  const models::runtime::LoadQuant quant =
      quantize.empty() ? models::runtime::LoadQuant::none : models::runtime::parse_load_quant(quantize);
  std::string path;
  std::string arch;
  if (quant != models::runtime::LoadQuant::none) {
    // Quantization at load is the runtime decoder's: every architecture runs there then.
    models::TextDecoderOptions o;
    o.max_context = context;
    o.quantize = quant;
    path = models::is_decoder_folder(name) ? name
           : smollm                        ? io::require_smollm2_gguf()
           : gemma                         ? io::require_gemma3_gguf()
                                           : io::require_smollm2_gguf(name);
    *id = smollm ? "SmolLM2-135M-Instruct" : gemma ? "Gemma-3-270M" : file_id(path);
    return std::make_unique<DecoderGen>(models::TextDecoder::load(path, o));
  }
  if (smollm) {
    path = io::require_smollm2_gguf();
    arch = "llama";
  } else if (gemma) {
    path = io::require_gemma3_gguf();
    arch = "gemma3";
  } else if (models::is_decoder_folder(name)) {
    models::TextDecoderOptions o;
    o.max_context = context;
    *id = file_id(name);
    return std::make_unique<DecoderGen>(models::TextDecoder::load(name, o));
  } else {
    path = io::require_smollm2_gguf(name);  // the file must exist (the error says where it looked)
    const io::GgufFile f = io::GgufFile::open(path);
    arch = f.has("general.architecture") ? f.get_string("general.architecture") : "";
    bool known = false;
    for (const std::string& a : models::runtime::decoder_architectures()) known = known || a == arch;
    std::string list;
    for (const std::string& a : models::runtime::decoder_architectures()) list += (list.empty() ? "" : ", ") + a;
    ATTN_CHECK(known, "serve: ", path, ": general.architecture is '", arch, "'; the runtime serves ", list);
    // A llama file the one-sequence engine does not take (a SentencePiece tokenizer as Llama 2 and
    // Mistral have, Llama 3's RoPE scaling) and every other architecture but gemma3 run on the runtime's
    // decoder alone.
    if (arch != "gemma3" && !(arch == "llama" && models::LlamaModel::can_load(f))) {
      models::TextDecoderOptions o;
      o.max_context = context;
      *id = file_id(path);
      return std::make_unique<DecoderGen>(models::TextDecoder::load(path, o));
    }
  }
  if (arch == "gemma3") {
    models::Gemma3Options o;
    o.max_context = context;
    *id = gemma ? "Gemma-3-270M" : file_id(path);
    return std::make_unique<Gemma3Gen>(models::Gemma3Model::load(path, o));
  }
  models::LlamaOptions o;
  o.max_context = context;
  *id = smollm ? "SmolLM2-135M-Instruct" : file_id(path);
  // Generation runs on the batched step (the runtime's decoder, with its own repacked weights); the
  // model's one-sequence path serves the attention export only, so it keeps f32 activations and no
  // second repacked copy.
  models::LlamaTuning t;
  t.q8_activations = false;
  return std::make_unique<LlamaGen>(models::LlamaModel::load(path, o, t));
}

}  // namespace attn::serve::detail
