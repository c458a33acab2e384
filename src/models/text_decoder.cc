// A text decoder from one GGUF file on the runtime (include/attn/models/text_decoder.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/models/text_stream.h>
#include <attn/text/chat_template.h>
#include <attn/text/decoder_tokenizer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace attn::models {

struct TextDecoder::Impl {
  std::optional<io::GgufFile> file;  // a GGUF file, or
  std::string folder;                // a Hugging Face folder
  std::unique_ptr<runtime::Decoder> dec;
  std::unique_ptr<text::DecoderTokenizer> tok;
  std::optional<std::string> chat_template;
  std::string template_name;
};

TextDecoder::TextDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TextDecoder::TextDecoder(TextDecoder&&) noexcept = default;
TextDecoder& TextDecoder::operator=(TextDecoder&&) noexcept = default;
TextDecoder::~TextDecoder() = default;

namespace {
// tokenizer_config.json's chat_template: a string, or a list of {name, template} (the "default" one).
std::optional<std::string> folder_template(const std::string& folder) {
  const std::string path = folder + "/tokenizer_config.json";
  if (!std::filesystem::exists(path)) return std::nullopt;
  const json::Value v = json::parse(io::read_file(path, "tokenizer config"));
  const json::Value* t = v.find("chat_template");
  if (!t || t->is_null()) {
    const std::string jinja = folder + "/chat_template.jinja";  // transformers 5 writes it beside
    if (std::filesystem::exists(jinja)) return io::read_file(jinja, "chat template");
    return std::nullopt;
  }
  if (t->is_string()) return t->as_string();
  ATTN_CHECK(t->is_array(), path, ": chat_template must be a string or a list of {name, template}");
  for (const json::Value& e : t->items())
    if (e.find("name") && e.at("name").is_string() && e.at("name").as_string() == "default")
      return e.at("template").as_string();
  throw Error(detail::concat(path, ": chat_template has no \"default\" entry"));
}
}  // namespace

TextDecoder TextDecoder::load(const std::string& path, const TextDecoderOptions& options) {
  auto impl = std::make_unique<Impl>();
  runtime::DecoderOptions o;
  o.max_context = options.max_context;
  o.quantize = options.quantize;
  if (std::filesystem::is_directory(path)) {
    impl->folder = path;
    const std::string tj = path + "/tokenizer.json";
    ATTN_CHECK(std::filesystem::exists(tj), path,
               ": no tokenizer.json (a Hugging Face decoder folder needs one)");
    impl->tok = text::load_tokenizer(tj);
    impl->dec = runtime::Decoder::load_hf(path, o);
    impl->chat_template = folder_template(path);
    impl->template_name = path + "/tokenizer_config.json: chat_template";
  } else {
    impl->file.emplace(io::GgufFile::open(path));
    impl->tok = text::load_tokenizer(*impl->file);
    impl->dec = runtime::Decoder::load(*impl->file, o);
    impl->chat_template = impl->file->chat_template();
    impl->template_name = path + ": tokenizer.chat_template";
  }
  const int64_t tv = impl->tok->vocab_size();
  // A Hugging Face vocabulary may be padded past the tokenizer's (embedding rows no token uses).
  ATTN_CHECK(tv == impl->dec->config().vocab || (!impl->file && tv < impl->dec->config().vocab), path,
             ": the tokenizer has ", tv, " tokens; the model ", impl->dec->config().vocab);
  return TextDecoder(std::move(impl));
}

runtime::Decoder& TextDecoder::decoder() { return *impl_->dec; }
const runtime::DecoderConfig& TextDecoder::config() const { return impl_->dec->config(); }
int64_t TextDecoder::capacity() const { return impl_->dec->batch_context(); }

text::TextPieces TextDecoder::chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns,
                                          bool add_generation_prompt) const {
  ATTN_CHECK(impl_->chat_template, impl_->template_name, ": the model has no chat template");
  const auto special = [&](int32_t id) -> std::optional<std::string> {
    if (id < 0) return std::nullopt;
    return impl_->tok->decode({id}, true);
  };
  const text::ChatTemplate chat(*impl_->chat_template, impl_->template_name, special(impl_->tok->bos_id()),
                                special(impl_->tok->eos_id()));
  std::vector<text::ChatMessage> msgs;
  for (const auto& [role, content] : turns) msgs.push_back({role, content});
  text::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return chat.render(msgs, o);
}

std::vector<int32_t> TextDecoder::encode(const text::TextPieces& pieces) const {
  return impl_->tok->encode(pieces, impl_->tok->add_bos());
}

std::vector<int32_t> TextDecoder::encode_text(const std::string& text) const {
  return impl_->tok->encode(text, impl_->tok->add_bos(), true);
}

std::string TextDecoder::decode(const std::vector<int32_t>& ids) const {
  return impl_->tok->decode(ids, false);
}

std::vector<std::string> TextDecoder::token_strings(const std::vector<int32_t>& ids) const {
  std::vector<std::string> out;
  for (int32_t id : ids) {
    std::string s = impl_->tok->decode({id}, true);
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

void TextDecoder::set_stop_tokens(GenerateOptions& g) const { models::set_stop_tokens(g, *impl_->tok); }

bool is_decoder_folder(const std::string& path) {
  try {
    const std::string cfg = path + "/config.json";
    if (!std::filesystem::is_directory(path) || !std::filesystem::exists(cfg)) return false;
    const json::Value v = json::parse(io::read_file(cfg, "model config"));
    const json::Value* t = v.find("model_type");
    if (!t || !t->is_string()) return false;
    for (const char* k : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text"})
      if (t->as_string() == k) return true;
    return false;
  } catch (const Error&) {
    return false;
  }
}

LlamaReply decoder_generate_text(TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                                 const LlamaTextOptions& options, uint64_t seed) {
  const auto P = static_cast<int64_t>(prompt_ids.size());
  const int64_t cap = model.capacity();
  ATTN_CHECK(P >= 1 && P <= cap, "generate: the prompt has ", P, " tokens; expected 1 to ", cap,
             " (the context)");
  ATTN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
             options.max_new_tokens);
  LlamaReply reply;
  reply.prompt_tokens = P;
  const int64_t n_new = std::min(options.max_new_tokens, cap - P);
  if (n_new == 0) return reply;
  runtime::KvCacheConfig kc = model.decoder().kv_layout();
  kc.block_tokens = 16;
  const int64_t blocks = (P + n_new + kc.block_tokens - 1) / kc.block_tokens * kc.layers + kc.layers;
  kc.pool_bytes =
      blocks * 2 * kc.kv_heads * kc.block_tokens * kc.head_dim * static_cast<int64_t>(sizeof(float));
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
