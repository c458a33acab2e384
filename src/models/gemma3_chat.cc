// Text generation with Gemma 3 (include/attn/models/gemma3_chat.h).
#include <attn/core/error.h>
#include <attn/models/gemma3_chat.h>
#include <attn/models/generate.h>
#include <attn/models/text_stream.h>

#include <algorithm>
#include <chrono>

namespace attn::models {

std::vector<int32_t> gemma3_prompt_ids(const Gemma3Model& model, const std::string& prompt, bool chat,
                                       const std::optional<std::string>& system) {
  const text::SpmTokenizer& tok = model.tokenizer();
  if (!chat) return tok.encode(prompt, tok.add_bos(), false);
  std::vector<Gemma3Model::Message> msgs;
  if (system && !system->empty()) msgs.push_back({"system", *system});
  msgs.push_back({"user", prompt});
  return tok.encode(model.chat_template_pieces(msgs, true), tok.add_bos());
}

LlamaReply gemma3_generate_text(Gemma3Model& model, const std::vector<int32_t>& prompt_ids,
                                const LlamaTextOptions& o, Rng& rng) {
  using clock = std::chrono::steady_clock;
  ATTN_CHECK(o.temperature >= 0, "gemma3: temperature must be >= 0 (0 = greedy); got ", o.temperature);
  ATTN_CHECK(!prompt_ids.empty(), "the prompt is empty (no tokens)");
  const text::SpmTokenizer& tok = model.tokenizer();
  GenerateOptions g = request_options(o.max_new_tokens, o.temperature, o.top_k, o.top_p);
  set_stop_tokens(g, tok);
  LlamaReply r;
  r.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  TextStream stream([&tok](const std::vector<int32_t>& ids) { return tok.decode(ids, false); });
  const auto emit = [&](const std::string& piece) {
    r.text += piece;
    if (o.on_text && !piece.empty()) o.on_text(piece);
  };
  const auto on_token = [&](int64_t token) {
    r.ids.push_back(static_cast<int32_t>(token));
    emit(stream.push(static_cast<int32_t>(token)));
  };
  const auto t0 = clock::now();
  auto t1 = t0;
  if (o.temperature == 0 && model.greedy_screened()) {
    // issue 19 (g19b): greedy through the screened vocabulary product (Gemma3Model::step_greedy): the
    // tokens of generate_from's greedy loop (the first maximum of the same logits), the same stops
    int32_t id = model.prefill_greedy(prompt_ids);
    t1 = clock::now();
    const int64_t cap = std::min<int64_t>(g.max_new_tokens, model.capacity() - model.position() + 1);
    for (int64_t n = 0; n < cap; ++n) {
      if (is_stop_token(g, id)) {
        r.ids.push_back(id);
        r.stopped = true;
        break;
      }
      on_token(id);
      if (n + 1 == cap) break;
      id = model.step_greedy(id);
    }
  } else {
    const std::span<const float> logits = model.prefill(prompt_ids);
    t1 = clock::now();
    const Generated out =
        generate_from(model, logits, g, rng, [&](int64_t, int64_t token) { on_token(token); });
    if (out.stop_token >= 0) {
      r.ids.push_back(static_cast<int32_t>(out.stop_token));
      r.stopped = true;
    }
  }
  if (r.stopped) emit(stream.push(r.ids.back()));  // the stop token's text, if it has one
  emit(stream.finish());  // a character cut by max_new_tokens ends the reply as U+FFFD
  r.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.generate_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return r;
}

}  // namespace attn::models
