// Text generation and chat with a Llama-family GGUF model (include/attn/models/llama.h): the
// library behind `attn generate --model smollm2 "prompt"` and `attn chat`. The tokens come from
// models::generate's loop (include/attn/models/generate.h); this adds the text around it: chat
// templates, the stop rule of the model's vocabulary, streaming of complete UTF-8 pieces, and the
// turns of a conversation kept in the KV cache.
#pragma once

#include <attn/core/random.h>
#include <attn/models/llama.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace attn::models {

struct LlamaTextOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0 = greedy; > 0 samples from softmax(logits / T)
  int64_t top_k = 0;       // sampling: only the K most likely tokens (0 = all)
  double top_p = 1;        // sampling: the smallest set of tokens whose probability reaches P, in (0, 1]
  // The reply as it is produced: each call gets the next piece of text, valid UTF-8 that never splits
  // a character (models::TextStream).
  std::function<void(const std::string&)> on_text;
};

struct LlamaReply {
  std::vector<int32_t> ids;  // generated tokens, the stop token included when one ended the reply
  bool stopped = false;      // a stop token (llama_is_stop) ended it
  // Everything on_text received: ids decoded, control tokens not rendered, always valid UTF-8
  // (models::TextStream): an ill-formed byte sequence the model wrote is U+FFFD, and so is a character
  // that max_new_tokens cut in the middle (ids keeps every generated token).
  std::string text;
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0;    // the prompt pass (prefill)
  double generate_seconds = 0;  // from the end of the prompt pass to the last token
};

// The model's stop tokens: its eos id and every control token of the vocabulary (e.g. <|im_end|>).
bool llama_is_stop(const LlamaModel& model, int32_t id);

// The prompt's text: with chat, `prompt` wrapped in the file's chat template as one user turn (after
// the system message when one is given, else the template's default) with the assistant prompt; else
// `prompt` itself. For display: the ids are llama_prompt_ids'.
std::string llama_prompt_text(const LlamaModel& model, const std::string& prompt, bool chat,
                              const std::optional<std::string>& system = std::nullopt);
// The prompt's ids. With chat, the template's pieces (LlamaModel::chat_template_pieces): special-token
// strings in `prompt` and `system` are text, never control tokens. Without chat, `prompt` is the
// operator's raw prompt: its special-token strings become their tokens (encode(prompt, false, true)).
std::vector<int32_t> llama_prompt_ids(const LlamaModel& model, const std::string& prompt, bool chat,
                                      const std::optional<std::string>& system = std::nullopt);

// Appends prompt_ids (non-empty) to the model's sequence and generates up to max_new_tokens tokens
// (greedy, or sampled from rng), streaming the text to on_text. Stops at a stop token or when the KV
// cache is full.
LlamaReply llama_generate_text(LlamaModel& model, const std::vector<int32_t>& prompt_ids,
                               const LlamaTextOptions& options, Rng& rng);

// A conversation: each turn is appended to the KV cache (the whole conversation stays in it).
class LlamaChat {
 public:
  // system: the system message (empty: the template's default); sampling draws from Rng(seed)
  // for the whole conversation.
  LlamaChat(LlamaModel& model, std::string system, LlamaTextOptions options, uint64_t seed);

  struct Turn {
    // The turn did not fit after the conversation so far: the conversation was cleared and the turn
    // answered as the first of a new one, unless too_long.
    bool context_full = false;
    // The turn (templated, with the system prompt, plus 2 tokens of reply) does not fit even an empty
    // context: nothing was generated (reply empty); turn_tokens and the model's capacity() say by how much.
    bool too_long = false;
    int64_t turn_tokens = 0;  // the templated turn's tokens
    LlamaReply reply;
  };
  // One user turn: templated, generated (streamed to options.on_text), then closed in the cache as the
  // template writes it after an assistant reply (derived from the template when the chat is made;
  // ChatML: <|im_end|>\n). The constructor throws when the template cannot continue a conversation.
  Turn say(const std::string& user_text);
  // Starts a new conversation.
  void reset();

 private:
  std::vector<int32_t> turn_ids(const std::string& user_text) const;  // this turn, templated
  LlamaModel& model_;
  std::string system_;
  std::string closing_;  // what the template writes after an assistant reply (ChatML: "<|im_end|>\n")
  LlamaTextOptions options_;
  Rng rng_;
  bool first_ = true;
};

}  // namespace attn::models
