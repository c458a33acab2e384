// Text generation with Gemma 3 (include/attn/models/gemma3.h): the library behind
// `attn generate --model gemma3 "prompt"`. Tokens come from models::generate's loop; this adds the
// prompt text (plain, or Gemma's chat format), the stop rule (eos and every control token, e.g.
// <end_of_turn>) and streaming of complete UTF-8 pieces. Reuses LlamaTextOptions / LlamaReply.
#pragma once

#include <attn/core/random.h>
#include <attn/models/gemma3.h>
#include <attn/models/llama_chat.h>

#include <optional>
#include <string>
#include <vector>

namespace attn::models {

// The prompt's ids: <bos> (when the file's add_bos_token) + the text, or with chat the text as one
// user turn of Gemma's chat format (after the system message when one is given) and the model prompt.
std::vector<int32_t> gemma3_prompt_ids(const Gemma3Model& model, const std::string& prompt, bool chat,
                                       const std::optional<std::string>& system = std::nullopt);
// Appends prompt_ids (non-empty) and generates up to max_new_tokens tokens (greedy, or sampled from
// rng), streaming the text to on_text. Stops at a stop token or when the KV cache is full.
LlamaReply gemma3_generate_text(Gemma3Model& model, const std::vector<int32_t>& prompt_ids,
                                const LlamaTextOptions& options, Rng& rng);

}  // namespace attn::models
