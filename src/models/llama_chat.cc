// Text generation and chat with a GGUF Llama (include/attn/models/llama_chat.h).
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/models/llama_chat.h>

#include <chrono>

namespace attn::models {

namespace {

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence.
std::size_t complete_utf8(const std::string& s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

GenerateOptions search_options(const LlamaModel& model, const LlamaTextOptions& o) {
  ATTN_CHECK(o.temperature >= 0, "llama: temperature must be >= 0 (0 = greedy); got ", o.temperature);
  GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.search = o.temperature > 0 ? SearchKind::sample : SearchKind::greedy;
  g.temperature = o.temperature > 0 ? o.temperature : 1.0;
  g.top_k = o.top_k;
  g.top_p = o.top_p;
  const text::ByteBpeTokenizer& tok = model.tokenizer();
  g.eos_id = tok.eos_id();
  const auto& types = tok.vocab().types;
  for (std::size_t id = 0; id < types.size(); ++id)
    if (types[id] == text::BpeTokenType::control && static_cast<int64_t>(id) != g.eos_id)
      g.stop_ids.push_back(static_cast<int64_t>(id));
  return g;
}

}  // namespace

bool llama_is_stop(const LlamaModel& model, int32_t id) {
  const auto& types = model.tokenizer().vocab().types;
  return id == model.tokenizer().eos_id() || (!types.empty() && types[id] == text::BpeTokenType::control);
}

std::string llama_prompt_text(const LlamaModel& model, const std::string& prompt, bool chat,
                              const std::optional<std::string>& system) {
  if (!chat) return prompt;
  std::vector<LlamaModel::Message> msgs;
  if (system) msgs.push_back({"system", *system});
  msgs.push_back({"user", prompt});
  return model.apply_chat_template(msgs, true);
}

LlamaReply llama_generate_text(LlamaModel& model, const std::vector<int32_t>& prompt_ids,
                               const LlamaTextOptions& options, Rng& rng) {
  using clock = std::chrono::steady_clock;
  const GenerateOptions g = search_options(model, options);
  ATTN_CHECK(!prompt_ids.empty(), "the prompt is empty (no tokens)");
  LlamaReply r;
  r.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  const auto t0 = clock::now();
  const std::span<const float> logits = model.prefill(prompt_ids);
  const auto t1 = clock::now();
  const text::ByteBpeTokenizer& tok = model.tokenizer();
  // Streams the complete UTF-8 prefix of the decoded reply after every token.
  const auto emit = [&](const std::string& text) {
    if (text.size() <= r.text.size()) return;
    const std::string piece = text.substr(r.text.size());
    r.text = text;
    if (options.on_text) options.on_text(piece);
  };
  const Generated out = generate_from(model, logits, g, rng, [&](int64_t, int64_t token) {
    r.ids.push_back(static_cast<int32_t>(token));
    const std::string text = tok.decode(r.ids, false);
    emit(text.substr(0, complete_utf8(text)));
  });
  if (out.stop_token >= 0) {
    r.ids.push_back(static_cast<int32_t>(out.stop_token));
    r.stopped = true;
  }
  emit(tok.decode(r.ids, false));  // what is left (an incomplete UTF-8 tail, the stop token's text)
  r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

LlamaChat::LlamaChat(LlamaModel& model, std::string system, LlamaTextOptions options, uint64_t seed)
    : model_(model), system_(std::move(system)), options_(std::move(options)), rng_(seed) {}

void LlamaChat::reset() {
  model_.clear();
  first_ = true;
}

LlamaChat::Turn LlamaChat::say(const std::string& user_text) {
  std::string turn;
  if (first_) {
    std::vector<LlamaModel::Message> msgs;
    if (!system_.empty()) msgs.push_back({"system", system_});
    msgs.push_back({"user", user_text});
    turn = model_.apply_chat_template(msgs, true);
  } else {
    // This turn alone: the template of [system, user] minus that of [system].
    const std::string both = model_.apply_chat_template({{"system", ""}, {"user", user_text}}, true);
    const std::string sys = model_.apply_chat_template({{"system", ""}}, false);
    turn = both.substr(sys.size());
  }
  const std::vector<int32_t> ids = model_.tokenizer().encode(turn, false, true);
  Turn t;
  if (model_.position() + static_cast<int64_t>(ids.size()) + 2 > model_.capacity()) {
    reset();
    t.context_full = true;
    return t;
  }
  t.reply = llama_generate_text(model_, ids, options_, rng_);
  // Close the assistant turn in the cache as the template writes it: <|im_end|>\n. The last generated
  // token (the stop token, or the last one when max_new_tokens ran out) is not in the cache yet.
  const std::vector<int32_t>& reply = t.reply.ids;
  const std::vector<int32_t> tail =
      model_.tokenizer().encode(t.reply.stopped ? "\n" : "<|im_end|>\n", false, true);
  if (!reply.empty() && model_.position() < model_.capacity()) model_.step(reply.back());
  if (model_.position() + static_cast<int64_t>(tail.size()) <= model_.capacity()) model_.prefill(tail);
  first_ = false;
  return t;
}

}  // namespace attn::models
