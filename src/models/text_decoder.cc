// A text decoder from one GGUF file on the runtime (include/attn/models/text_decoder.h).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/models/text_stream.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/chat_template.h>
#include <attn/text/spm.h>

#include <algorithm>
#include <chrono>
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

LlamaReply decoder_generate_text(TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                                 const LlamaTextOptions& options, uint64_t seed) {
  const auto P = static_cast<int64_t>(prompt_ids.size());
  const int64_t cap = model.capacity();
  ATTN_CHECK(P >= 1 && P <= cap, "generate: the prompt has ", P, " tokens; expected 1 to ", cap,
             " (the context)");
  ATTN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ", options.max_new_tokens);
  LlamaReply reply;
  reply.prompt_tokens = P;
  const int64_t n_new = std::min(options.max_new_tokens, cap - P);
  if (n_new == 0) return reply;
  runtime::KvCacheConfig kc = model.decoder().kv_layout();
  kc.block_tokens = 16;
  const int64_t blocks = (P + n_new + kc.block_tokens - 1) / kc.block_tokens * kc.layers + kc.layers;
  kc.pool_bytes = blocks * 2 * kc.kv_heads * kc.block_tokens * kc.head_dim * static_cast<int64_t>(sizeof(float));
  runtime::PagedKvCache cache(kc);
  runtime::Scheduler sched(model.decoder(), cache);
  runtime::SequenceRequest req;
  req.prompt = prompt_ids;
  req.options.max_new_tokens = n_new;
  req.options.search = options.temperature > 0 ? SearchKind::sample : SearchKind::greedy;
  req.options.temperature = options.temperature;
  req.options.top_k = options.top_k;
  req.options.top_p = options.top_p;
  model.set_stop_tokens(req.options);
  req.seed = seed;
  TextStream ts([&](const std::vector<int32_t>& ids) { return model.decode(ids); });
  const auto t0 = std::chrono::steady_clock::now();
  auto t1 = t0;
  const auto emit = [&](const std::string& piece) {
    if (piece.empty()) return;
    reply.text += piece;
    if (options.on_text) options.on_text(piece);
  };
  req.on_event = [&](const runtime::SequenceEvent& e) {
    if (e.kind == runtime::SequenceEvent::Kind::token) {
      if (reply.ids.empty()) t1 = std::chrono::steady_clock::now();
      reply.ids.push_back(static_cast<int32_t>(e.token));
      emit(ts.push(static_cast<int32_t>(e.token)));
    } else if (e.kind == runtime::SequenceEvent::Kind::finished) {
      ATTN_CHECK(e.reason != runtime::FinishReason::error, "generate: ", e.error);
      if (e.stop_token >= 0) {
        reply.ids.push_back(static_cast<int32_t>(e.stop_token));
        reply.stopped = true;
      }
    }
  };
  sched.submit(std::move(req));
  while (sched.step()) {
  }
  emit(ts.finish());
  const auto t2 = std::chrono::steady_clock::now();
  reply.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  reply.generate_seconds = std::chrono::duration<double>(t2 - t1).count();
  return reply;
}

}  // namespace attn::models
