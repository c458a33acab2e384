// text::load_tokenizer and the DecoderTokenizer adapters (include/attn/text/decoder_tokenizer.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/decoder_tokenizer.h>
#include <attn/text/spm.h>

namespace attn::text {
namespace {

class ByteBpeDecoderTokenizer final : public DecoderTokenizer {
 public:
  explicit ByteBpeDecoderTokenizer(ByteBpeTokenizer t) : t_(std::move(t)) {}
  std::string kind() const override {
    if (!t_.vocab().byte_level) return "SentencePiece-style BPE (byte fallback)";
    return std::string("byte-level BPE (") + pre_tokenizer_name(t_.vocab().pre) + ")";
  }
  int64_t vocab_size() const override { return t_.vocab_size(); }
  int32_t bos_id() const override { return t_.bos_id(); }
  int32_t eos_id() const override { return t_.eos_id(); }
  bool add_bos() const override { return t_.vocab().add_bos; }
  int32_t token_to_id(std::string_view token) const override { return t_.token_to_id(token); }
  const std::string& id_to_token(int32_t id) const override { return t_.id_to_token(id); }
  bool is_control(int32_t id) const override {
    const BpeTokenType ty = t_.vocab().types[static_cast<std::size_t>(id_check(id))];
    return ty == BpeTokenType::control || ty == BpeTokenType::unknown;
  }
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    return t_.encode(text, add_bos, parse_special);
  }
  std::vector<int32_t> encode(const TextPieces& pieces, bool add_bos) const override {
    return t_.encode(pieces, add_bos);
  }
  std::string decode(const std::vector<int32_t>& ids, bool render_special) const override {
    return t_.decode(ids, render_special);
  }
  const ByteBpeTokenizer* byte_bpe() const override { return &t_; }

 private:
  int32_t id_check(int32_t id) const {
    t_.id_to_token(id);  // throws when out of range
    return id;
  }
  ByteBpeTokenizer t_;
};

class SpmDecoderTokenizer final : public DecoderTokenizer {
 public:
  explicit SpmDecoderTokenizer(SpmTokenizer t) : t_(std::move(t)) {}
  std::string kind() const override { return "SentencePiece BPE (GGUF llama)"; }
  int64_t vocab_size() const override { return t_.vocab_size(); }
  int32_t bos_id() const override { return t_.bos_id(); }
  int32_t eos_id() const override { return t_.eos_id(); }
  bool add_bos() const override { return t_.add_bos(); }
  int32_t token_to_id(std::string_view token) const override { return t_.token_to_id(token); }
  const std::string& id_to_token(int32_t id) const override { return t_.id_to_token(id); }
  bool is_control(int32_t id) const override {
    const SpmTokenType ty = t_.type(id);
    return ty == SpmTokenType::control || ty == SpmTokenType::unknown;
  }
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
    return t_.encode(text, add_bos, parse_special);
  }
  std::vector<int32_t> encode(const TextPieces& pieces, bool add_bos) const override {
    return t_.encode(pieces, add_bos);
  }
  std::string decode(const std::vector<int32_t>& ids, bool render_special) const override {
    return t_.decode(ids, render_special);
  }
  const SpmTokenizer* spm() const override { return &t_; }

 private:
  SpmTokenizer t_;
};

}  // namespace

std::unique_ptr<DecoderTokenizer> load_tokenizer(const std::string& path) {
  // The model type first, so that a WordPiece or Unigram file gets an error that says so.
  json::Value j;
  try {
    j = json::parse(io::read_file(path, "tokenizer.json"));
  } catch (const Error& e) {
    throw Error(detail::concat("tokenizer.json: ", path, ": ", e.what()));
  }
  const json::Value* model = j.is_object() ? j.find("model") : nullptr;
  const json::Value* type = model && model->is_object() ? model->find("type") : nullptr;
  const std::string t = type && type->is_string() ? type->as_string() : "";
  if (t != "BPE")
    throw Error(
        detail::concat("tokenizer.json: ", path, ": ",
                       t.empty() ? std::string("no model.type") : "model type \"" + t + "\" is not supported",
                       " for a decoder; supported: \"BPE\" (byte-level or with byte "
                       "fallback). WordPiece and Unigram files are read by the encoders (BERT, XLM-R)"));
  return std::make_unique<ByteBpeDecoderTokenizer>(ByteBpeTokenizer::from_tokenizer_json(path));
}

std::unique_ptr<DecoderTokenizer> load_tokenizer(const io::GgufFile& f) {
  if (!f.has("tokenizer.ggml.model"))
    throw Error(
        detail::concat("tokenizer: ", f.path(), ": no tokenizer.ggml.model (the file carries no tokenizer)"));
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "gpt2") return std::make_unique<ByteBpeDecoderTokenizer>(ByteBpeTokenizer::from_gguf(f));
  if (model == "llama") return std::make_unique<SpmDecoderTokenizer>(SpmTokenizer::from_gguf(f));
  throw Error(
      detail::concat("tokenizer: ", f.path(), ": tokenizer.ggml.model \"", model,
                     "\" is not supported; supported: \"gpt2\" (byte-level BPE), \"llama\" (SentencePiece)"));
}

}  // namespace attn::text
