// A text decoder from one GGUF file on the runtime (include/attn/models/text_decoder.h).
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
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
// Gemma's turn format, for Gemma 2/3 files without a template (the Gemma 3 270M GGUF carries none):
// system messages go before the next user turn's text, assistant turns are "model" turns.
constexpr const char* kGemmaTurns =
    "{%- set ns = namespace(system='') -%}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}"
    "{%- set ns.system = ns.system + message['content'] + '\\n\\n' -%}"
    "{%- elif message['role'] in ['user', 'assistant', 'model'] -%}"
    "{%- set role = 'user' if message['role'] == 'user' else 'model' -%}"
    "{{ '<start_of_turn>' + role + '\\n' }}"
    "{%- if role == 'user' -%}{{ ns.system }}{%- set ns.system = '' -%}{%- endif -%}"
    "{{ message['content'] }}{{ '<end_of_turn>\\n' }}"
    "{%- else -%}"
    "{{ raise_exception('role ' + message['role'] + ': expected system, user or assistant') }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}";

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
    impl->dec = runtime::Decoder::load(*impl->file, o);  // first: an unsupported architecture is named
    impl->tok = text::load_tokenizer(*impl->file);
    impl->chat_template = impl->file->chat_template();
    impl->template_name = path + ": tokenizer.chat_template";
  }
  const std::string& arch = impl->dec->config().arch;
  if (!impl->chat_template && (arch == "gemma2" || arch == "gemma3")) {
    impl->chat_template = kGemmaTurns;
    impl->template_name = "attn's Gemma turn format (" + path + " has no chat template)";
  }
  const int64_t tv = impl->tok->vocab_size();
  // A Hugging Face vocabulary may be padded past the tokenizer's (embedding rows no token uses).
  ATTN_CHECK(tv == impl->dec->config().vocab || (!impl->file && tv < impl->dec->config().vocab), path,
             ": the tokenizer has ", tv, " tokens; the model ", impl->dec->config().vocab);
  TextDecoder t(std::move(impl));
  if (options.greedy_screen_at_load) t.decoder().prepare_greedy_picks(t.encode_text("Hello, world."));
  return t;
}

runtime::Decoder& TextDecoder::decoder() { return *impl_->dec; }
const runtime::Decoder& TextDecoder::decoder() const { return *impl_->dec; }
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
const text::DecoderTokenizer& TextDecoder::tokenizer() const { return *impl_->tok; }

bool is_known_decoder_name(const std::string& name) {
  return name == "smollm2" || name == "SmolLM2-135M-Instruct" || name == "gemma3" || name == "gemma-3-270m" ||
         name == "Gemma-3-270M";
}

DecoderModelName resolve_decoder_model(const std::string& name) {
  if (name == "smollm2" || name == "SmolLM2-135M-Instruct")
    return {io::require_smollm2_gguf(), "SmolLM2-135M-Instruct"};
  if (name == "gemma3" || name == "gemma-3-270m" || name == "Gemma-3-270M")
    return {io::require_gemma3_gguf(), "Gemma-3-270M"};
  std::string id = name;
  while (id.size() > 1 && id.back() == '/') id.pop_back();
  if (const std::size_t slash = id.find_last_of('/'); slash != std::string::npos) id = id.substr(slash + 1);
  if (id.size() > 5 && id.compare(id.size() - 5, 5, ".gguf") == 0) id.resize(id.size() - 5);
  if (std::filesystem::is_regular_file(name)) return {name, id};
  if (std::filesystem::is_directory(name)) {
    if (std::filesystem::exists(name + "/config.json")) return {name, id};
    if (const auto p = io::find_smollm2_gguf(name)) return {*p, "SmolLM2-135M-Instruct"};  // a package folder
  }
  throw Error(
      detail::concat("model: '", name, "' is neither a file nor a folder; expected smollm2, gemma3, a ",
                     ".gguf file or a Hugging Face folder (config.json, safetensors, tokenizer.json)"));
}

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

namespace {

void check_request(const TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                   const TextOptions& options) {
  const auto P = static_cast<int64_t>(prompt_ids.size());
  const int64_t cap = model.capacity();
  ATTN_CHECK(P >= 1 && P <= cap, "generate: the prompt has ", P, " tokens; expected 1 to ", cap,
             " (the context)");
  ATTN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0, got ",
             options.max_new_tokens);
  ATTN_CHECK(options.temperature >= 0, "generate: temperature must be >= 0, got ", options.temperature);
}

runtime::KvCacheConfig one_sequence_pool(const TextDecoder& model, int64_t positions) {
  return runtime::one_sequence_pool(model.decoder().kv_layout(), positions);
}

// One request through `sched` (idle before and after), the text streamed through models::TextStream.
TextReply run_request(TextDecoder& model, runtime::Scheduler& sched, const std::vector<int32_t>& prompt_ids,
                      const TextOptions& options, uint64_t seed) {
  TextReply reply;
  reply.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  const int64_t n_new = std::min(options.max_new_tokens, model.capacity() - reply.prompt_tokens);
  if (n_new == 0) return reply;
  runtime::SequenceRequest req;
  req.prompt = prompt_ids;
  req.options = request_options(n_new, options.temperature, options.top_k, options.top_p);
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
  std::string error;
  req.on_event = [&](const runtime::SequenceEvent& e) {
    if (e.kind == runtime::SequenceEvent::Kind::token) {
      if (reply.ids.empty()) t1 = std::chrono::steady_clock::now();
      reply.ids.push_back(static_cast<int32_t>(e.token));
      emit(ts.push(static_cast<int32_t>(e.token)));
    } else if (e.kind == runtime::SequenceEvent::Kind::finished) {
      if (e.reason == runtime::FinishReason::error) error = e.error;
      if (e.stop_token >= 0) {
        reply.ids.push_back(static_cast<int32_t>(e.stop_token));
        reply.stopped = true;
      }
    }
  };
  const int64_t id = sched.submit(std::move(req));
  try {
    while (sched.step()) {
    }
  } catch (...) {  // on_text threw (a caller stopping early): the sequence gives its blocks back
    sched.cancel(id);
    throw;
  }
  ATTN_CHECK(error.empty(), "generate: ", error);
  emit(ts.finish());
  const auto t2 = std::chrono::steady_clock::now();
  if (reply.ids.empty()) t1 = t2;
  reply.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  reply.generate_seconds = std::chrono::duration<double>(t2 - t1).count();
  return reply;
}

}  // namespace

TextReply decoder_generate_text(TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                                const TextOptions& options, uint64_t seed) {
  check_request(model, prompt_ids, options);
  const auto P = static_cast<int64_t>(prompt_ids.size());
  runtime::PagedKvCache cache(
      one_sequence_pool(model, P + std::min(options.max_new_tokens, model.capacity() - P)));
  runtime::Scheduler sched(model.decoder(), cache);
  return run_request(model, sched, prompt_ids, options, seed);
}

// ---------------------------------------------------------------- a session

struct DecoderSession::Impl {
  TextDecoder& model;
  runtime::PagedKvCache cache;
  std::unique_ptr<runtime::Scheduler> sched;
  int64_t cached = 0;
  explicit Impl(TextDecoder& m) : model(m), cache(one_sequence_pool(m, m.capacity())) { restart(); }
  void restart() {
    sched.reset();
    cache = runtime::PagedKvCache(cache.config());
    sched = std::make_unique<runtime::Scheduler>(model.decoder(), cache);
  }
};

DecoderSession::DecoderSession(TextDecoder& model) : impl_(std::make_unique<Impl>(model)) {}
DecoderSession::~DecoderSession() = default;

TextReply DecoderSession::generate(const std::vector<int32_t>& prompt_ids, const TextOptions& options,
                                   uint64_t seed) {
  check_request(impl_->model, prompt_ids, options);
  const int64_t before = impl_->sched->stats().cached_tokens;
  TextReply r = run_request(impl_->model, *impl_->sched, prompt_ids, options, seed);
  impl_->cached = impl_->sched->stats().cached_tokens - before;
  return r;
}

void DecoderSession::clear() {
  impl_->restart();
  impl_->cached = 0;
}
int64_t DecoderSession::cached_tokens() const { return impl_->cached; }
int64_t DecoderSession::kv_bytes_reserved() const { return impl_->cache.accounting().reserved; }

// ---------------------------------------------------------------- a conversation

namespace {
// What the model's template writes after an assistant reply: the template of [user, assistant R]
// minus that of [user] with the generation prompt, minus R.
std::string reply_closing(const TextDecoder& model) {
  const std::string reply = "R";
  const std::string open = text::join_pieces(model.chat_pieces({{"user", "u"}}, true));
  const std::string done = text::join_pieces(model.chat_pieces({{"user", "u"}, {"assistant", reply}}, false));
  ATTN_CHECK(done.compare(0, open.size(), open) == 0 && done.compare(open.size(), reply.size(), reply) == 0,
             "chat: the model's chat template does not write an assistant reply right after its ",
             "generation prompt, so a conversation cannot continue in the cache; use one prompt per turn");
  return done.substr(open.size() + reply.size());
}
}  // namespace

DecoderChat::DecoderChat(TextDecoder& model, std::string system, TextOptions options, uint64_t seed)
    : model_(model),
      session_(model),
      system_(std::move(system)),
      closing_(reply_closing(model)),
      options_(std::move(options)),
      seed_(seed) {}
DecoderChat::~DecoderChat() = default;

void DecoderChat::reset() {
  history_.clear();
  session_.clear();
}

int64_t DecoderChat::tokens() const { return static_cast<int64_t>(history_.size()); }

std::vector<int32_t> DecoderChat::turn_ids(const std::string& user_text) const {
  if (history_.empty()) {
    std::vector<std::pair<std::string, std::string>> msgs;
    if (!system_.empty()) msgs.emplace_back("system", system_);
    msgs.emplace_back("user", user_text);
    return model_.encode(model_.chat_pieces(msgs, true));
  }
  // This turn alone: the template of [system, user] minus that of [system], piece by piece. The
  // template merges neighbouring pieces of the same kind, so the cut is made in bytes. (No
  // begin-of-sequence token: the conversation has one.)
  const text::TextPieces both = model_.chat_pieces({{"system", ""}, {"user", user_text}}, true);
  const std::string sys = text::join_pieces(model_.chat_pieces({{"system", ""}}, false));
  text::TextPieces turn;
  std::size_t skip = sys.size(), matched = 0;
  for (const text::TextPiece& p : both) {
    const std::size_t n = std::min(skip, p.text.size());
    ATTN_CHECK(p.text.compare(0, n, sys, matched, n) == 0,
               "chat: the template of a conversation does not start with that of its system message (they ",
               "differ at byte ", matched, ")");
    matched += n;
    skip -= n;
    if (n < p.text.size()) turn.push_back({p.text.substr(n), p.allow_special});
  }
  ATTN_CHECK(skip == 0, "chat: the template of a conversation is shorter than that of its system message");
  return model_.tokenizer().encode(turn, false);
}

DecoderChat::Turn DecoderChat::say(const std::string& user_text) {
  std::vector<int32_t> ids = turn_ids(user_text);
  Turn t;
  const int64_t cap = model_.capacity();
  if (tokens() + static_cast<int64_t>(ids.size()) + 2 > cap) {
    // The conversation is full: clear it and answer the turn as the first of a new one (with the
    // system prompt). A turn that does not fit even an empty context is reported, never dropped.
    reset();
    t.context_full = true;
    ids = turn_ids(user_text);
    t.turn_tokens = static_cast<int64_t>(ids.size());
    if (t.turn_tokens + 2 > cap) {
      t.too_long = true;
      return t;
    }
  }
  t.turn_tokens = static_cast<int64_t>(ids.size());
  history_.insert(history_.end(), ids.begin(), ids.end());
  t.reply = session_.generate(history_, options_, mix_seed(seed_, static_cast<uint64_t>(turns_++)));
  t.cached_tokens = session_.cached_tokens();
  // Close the assistant turn as the template writes it (ChatML: <|im_end|>\n); a stop token that is
  // the closing's start (<|im_end|>) stands for that part of it.
  const std::vector<int32_t>& reply = t.reply.ids;
  std::string closing = closing_;
  if (t.reply.stopped && !reply.empty()) {
    const std::string stop = model_.tokenizer().decode({reply.back()}, true);
    if (!stop.empty() && closing.compare(0, stop.size(), stop) == 0) closing.erase(0, stop.size());
  }
  history_.insert(history_.end(), reply.begin(), reply.end());
  const std::vector<int32_t> tail = model_.tokenizer().encode(closing, false, true);
  if (tokens() + static_cast<int64_t>(tail.size()) <= cap)
    history_.insert(history_.end(), tail.begin(), tail.end());
  if (tokens() > cap) history_.resize(static_cast<std::size_t>(cap));
  return t;
}

}  // namespace attn::models
