// Text generation and chat with a GGUF Llama (include/attn/models/llama_chat.h).
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/models/llama_chat.h>
#include <attn/text/utf8.h>

#include <chrono>

namespace attn::models {

namespace {

std::size_t complete_utf8(const std::string& s) { return text::complete_utf8_prefix(s); }

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
  // What is left: the stop token's text. When max_new_tokens ran out inside a multi-token UTF-8
  // character, its partial bytes are dropped (r.ids still holds every token): the reply never ends in
  // the middle of a character.
  const std::string all = tok.decode(r.ids, false);
  emit(all.substr(0, complete_utf8(all)));
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

std::vector<int32_t> LlamaChat::turn_ids(const std::string& user_text) const {
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
  return model_.tokenizer().encode(turn, false, true);
}

LlamaChat::Turn LlamaChat::say(const std::string& user_text) {
  std::vector<int32_t> ids = turn_ids(user_text);
  Turn t;
  if (model_.position() + static_cast<int64_t>(ids.size()) + 2 > model_.capacity()) {
    // The conversation is full: clear it and answer the turn as the first of a new one (with the
    // system prompt). A turn that does not fit even an empty context is reported, never dropped.
    reset();
    t.context_full = true;
    ids = turn_ids(user_text);
    t.turn_tokens = static_cast<int64_t>(ids.size());
    if (t.turn_tokens + 2 > model_.capacity()) {
      t.too_long = true;
      return t;
    }
  }
  t.turn_tokens = static_cast<int64_t>(ids.size());
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
