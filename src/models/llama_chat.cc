// Text generation and chat with a GGUF Llama (include/attn/models/llama_chat.h).
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/models/llama_chat.h>
#include <attn/models/text_stream.h>

#include <chrono>

namespace attn::models {

namespace {

GenerateOptions search_options(const LlamaModel& model, const LlamaTextOptions& o) {
  ATTN_CHECK(o.temperature >= 0, "llama: temperature must be >= 0 (0 = greedy); got ", o.temperature);
  GenerateOptions g = request_options(o.max_new_tokens, o.temperature, o.top_k, o.top_p);
  set_stop_tokens(g, model.tokenizer());
  return g;
}

}  // namespace

bool llama_is_stop(const LlamaModel& model, int32_t id) {
  const auto& types = model.tokenizer().vocab().types;
  return id == model.tokenizer().eos_id() || (!types.empty() && types[id] == text::BpeTokenType::control);
}

namespace {
std::vector<LlamaModel::Message> prompt_messages(const std::string& prompt,
                                                 const std::optional<std::string>& system) {
  std::vector<LlamaModel::Message> msgs;
  if (system) msgs.push_back({"system", *system});
  msgs.push_back({"user", prompt});
  return msgs;
}
}  // namespace

std::string llama_prompt_text(const LlamaModel& model, const std::string& prompt, bool chat,
                              const std::optional<std::string>& system) {
  return chat ? model.apply_chat_template(prompt_messages(prompt, system), true) : prompt;
}

std::vector<int32_t> llama_prompt_ids(const LlamaModel& model, const std::string& prompt, bool chat,
                                      const std::optional<std::string>& system) {
  const text::ByteBpeTokenizer& tok = model.tokenizer();
  if (!chat) return tok.encode(prompt, false, true);
  return tok.encode(model.chat_template_pieces(prompt_messages(prompt, system), true));
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
  TextStream stream([&tok](const std::vector<int32_t>& ids) { return tok.decode(ids, false); });
  const auto emit = [&](const std::string& piece) {
    r.text += piece;
    if (options.on_text && !piece.empty()) options.on_text(piece);
  };
  const Generated out = generate_from(model, logits, g, rng, [&](int64_t, int64_t token) {
    r.ids.push_back(static_cast<int32_t>(token));
    emit(stream.push(static_cast<int32_t>(token)));
  });
  if (out.stop_token >= 0) {
    r.ids.push_back(static_cast<int32_t>(out.stop_token));
    r.stopped = true;
    emit(stream.push(static_cast<int32_t>(out.stop_token)));  // its text, if it has one
  }
  // What is held back: a character cut by max_new_tokens ends the reply as U+FFFD.
  emit(stream.finish());
  r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

namespace {

// What the model's template writes after an assistant reply: the template of [user, assistant R]
// minus that of [user] with the generation prompt, minus R.
std::string reply_closing(const LlamaModel& model) {
  const std::string reply = "R";
  const std::string open = text::join_pieces(model.chat_template_pieces({{"user", "u"}}, true));
  const std::string done =
      text::join_pieces(model.chat_template_pieces({{"user", "u"}, {"assistant", reply}}, false));
  ATTN_CHECK(done.compare(0, open.size(), open) == 0 && done.compare(open.size(), reply.size(), reply) == 0,
             "llama chat: the model's chat template does not write an assistant reply right after its ",
             "generation prompt, so a conversation cannot continue in the cache; use one prompt per turn");
  return done.substr(open.size() + reply.size());
}

}  // namespace

LlamaChat::LlamaChat(LlamaModel& model, std::string system, LlamaTextOptions options, uint64_t seed)
    : model_(model),
      system_(std::move(system)),
      closing_(reply_closing(model)),
      options_(std::move(options)),
      rng_(seed) {}

void LlamaChat::reset() {
  model_.clear();
  first_ = true;
}

std::vector<int32_t> LlamaChat::turn_ids(const std::string& user_text) const {
  text::TextPieces turn;
  if (first_) {
    std::vector<LlamaModel::Message> msgs;
    if (!system_.empty()) msgs.push_back({"system", system_});
    msgs.push_back({"user", user_text});
    turn = model_.chat_template_pieces(msgs, true);
  } else {
    // This turn alone: the template of [system, user] minus that of [system], piece by piece.
    // The template merges neighbouring pieces of the same kind, so the cut is made in bytes.
    const text::TextPieces both = model_.chat_template_pieces({{"system", ""}, {"user", user_text}}, true);
    const std::string sys = text::join_pieces(model_.chat_template_pieces({{"system", ""}}, false));
    std::size_t skip = sys.size(), matched = 0;
    for (const text::TextPiece& p : both) {
      const std::size_t n = std::min(skip, p.text.size());
      ATTN_CHECK(p.text.compare(0, n, sys, matched, n) == 0,
                 "llama chat: the template of a conversation does not start with that of its system ",
                 "message (they differ at byte ", matched, ")");
      matched += n;
      skip -= n;
      if (n < p.text.size()) turn.push_back({p.text.substr(n), p.allow_special});
    }
    ATTN_CHECK(skip == 0,
               "llama chat: the template of a conversation is shorter than that of its system message");
  }
  return model_.tokenizer().encode(turn);
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
  // Close the assistant turn in the cache as the template writes it (ChatML: <|im_end|>\n). The last
  // generated token (the stop token, or the last one when max_new_tokens ran out) is not in the cache
  // yet; a stop token that is the closing's start (<|im_end|>) stands for that part of it.
  const std::vector<int32_t>& reply = t.reply.ids;
  std::string closing = closing_;
  if (t.reply.stopped && !reply.empty()) {
    const std::string stop = model_.tokenizer().decode({reply.back()}, true);
    if (!stop.empty() && closing.compare(0, stop.size(), stop) == 0) closing.erase(0, stop.size());
  }
  const std::vector<int32_t> tail = model_.tokenizer().encode(closing, false, true);
  if (!reply.empty() && model_.position() < model_.capacity()) model_.step(reply.back());
  if (!tail.empty() && model_.position() + static_cast<int64_t>(tail.size()) <= model_.capacity())
    model_.prefill(tail);
  first_ = false;
  return t;
}

}  // namespace attn::models
