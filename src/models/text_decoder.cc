// A text decoder from one GGUF file on the runtime (include/attn/models/text_decoder.h).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/models/text_decoder.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/chat_template.h>
#include <attn/text/spm.h>

#include <cstdio>
#include <optional>
#include <variant>

namespace attn::models {

struct TextDecoder::Impl {
  io::GgufFile file;
  std::unique_ptr<runtime::Decoder> dec;
  std::variant<text::ByteBpeTokenizer, text::SpmTokenizer> tok;
  explicit Impl(io::GgufFile f, text::ByteBpeTokenizer t) : file(std::move(f)), tok(std::move(t)) {}
  explicit Impl(io::GgufFile f, text::SpmTokenizer t) : file(std::move(f)), tok(std::move(t)) {}

  std::string render(int32_t id) const {
    return std::visit([&](const auto& t) { return t.decode({id}, true); }, tok);
  }
};

TextDecoder::TextDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TextDecoder::TextDecoder(TextDecoder&&) noexcept = default;
TextDecoder& TextDecoder::operator=(TextDecoder&&) noexcept = default;
TextDecoder::~TextDecoder() = default;

TextDecoder TextDecoder::load(const std::string& path, const TextDecoderOptions& options) {
  io::GgufFile f = io::GgufFile::open(path);
  const std::string model = f.has("tokenizer.ggml.model") ? f.get_string("tokenizer.ggml.model") : "";
  std::unique_ptr<Impl> impl;
  if (model == "gpt2") {
    text::ByteBpeTokenizer t = text::ByteBpeTokenizer::from_gguf(f);
    impl = std::make_unique<Impl>(std::move(f), std::move(t));
  } else if (model == "llama") {
    text::SpmTokenizer t = text::SpmTokenizer::from_gguf(f);
    impl = std::make_unique<Impl>(std::move(f), std::move(t));
  } else {
    throw Error(detail::concat(path, ": tokenizer.ggml.model is \"", model,
                               "\"; supported: \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece)"));
  }
  runtime::DecoderOptions o;
  o.max_context = options.max_context;
  impl->dec = runtime::Decoder::load(impl->file, o);
  const int64_t tv = std::visit([](const auto& t) { return t.vocab_size(); }, impl->tok);
  ATTN_CHECK(tv == impl->dec->config().vocab, path, ": the tokenizer has ", tv, " tokens; the model ",
             impl->dec->config().vocab);
  return TextDecoder(std::move(impl));
}

runtime::Decoder& TextDecoder::decoder() { return *impl_->dec; }
const runtime::DecoderConfig& TextDecoder::config() const { return impl_->dec->config(); }
const io::GgufFile& TextDecoder::file() const { return impl_->file; }
int64_t TextDecoder::capacity() const { return impl_->dec->batch_context(); }

text::TextPieces TextDecoder::chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns,
                                          bool add_generation_prompt) const {
  const io::GgufFile& f = impl_->file;
  const std::optional<std::string> source = f.chat_template();
  ATTN_CHECK(source, f.path(), ": no tokenizer.chat_template in the file");
  const auto special = [&](int32_t id) -> std::optional<std::string> {
    if (id < 0) return std::nullopt;
    return impl_->render(id);
  };
  const int32_t bos = std::visit([](const auto& t) { return t.bos_id(); }, impl_->tok);
  const int32_t eos = std::visit([](const auto& t) { return t.eos_id(); }, impl_->tok);
  const text::ChatTemplate chat(*source, f.path() + ": tokenizer.chat_template", special(bos), special(eos));
  std::vector<text::ChatMessage> msgs;
  for (const auto& [role, content] : turns) msgs.push_back({role, content});
  text::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return chat.render(msgs, o);
}

std::vector<int32_t> TextDecoder::encode(const text::TextPieces& pieces) const {
  if (const auto* b = std::get_if<text::ByteBpeTokenizer>(&impl_->tok)) return b->encode(pieces, b->vocab().add_bos);
  const auto& s = std::get<text::SpmTokenizer>(impl_->tok);
  return s.encode(pieces, s.add_bos());
}

std::vector<int32_t> TextDecoder::encode_text(const std::string& text) const {
  if (const auto* b = std::get_if<text::ByteBpeTokenizer>(&impl_->tok)) return b->encode(text, b->vocab().add_bos, true);
  const auto& s = std::get<text::SpmTokenizer>(impl_->tok);
  return s.encode(text, s.add_bos(), true);
}

std::string TextDecoder::decode(const std::vector<int32_t>& ids) const {
  return std::visit([&](const auto& t) { return t.decode(ids, false); }, impl_->tok);
}

std::vector<std::string> TextDecoder::token_strings(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    std::string s = impl_->render(id);
    if (json::find_invalid_utf8(s) != std::string::npos) {
      std::string hex;
      char buf[8];
      for (unsigned char ch : s) {
        std::snprintf(buf, sizeof buf, "<0x%02X>", ch);
        hex += buf;
      }
      s = hex;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void TextDecoder::set_stop_tokens(GenerateOptions& g) const {
  std::visit([&](const auto& t) { models::set_stop_tokens(g, t); }, impl_->tok);
}

}  // namespace attn::models
