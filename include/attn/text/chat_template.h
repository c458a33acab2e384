// A model's chat template (the Jinja text of tokenizer.chat_template in GGUF, or chat_template in
// tokenizer_config.json) rendered by attn's own Jinja engine (text/jinja.h) as transformers'
// apply_chat_template renders it: the variables are messages, tools and documents (none),
// add_generation_prompt, the model's bos_token / eos_token, and any extra variables (e.g.
// enable_thinking). The result keeps provenance: the template's own markers and the special tokens
// allow special tokens, the messages never (docs/chat_templates.md).
#pragma once

#include <attn/text/jinja.h>
#include <attn/text/text_piece.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attn::json {
class Value;
}

namespace attn::text {

struct ChatMessage {
  std::string role, content;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // append the template's assistant prompt
  // Extra template variables (a dict, e.g. {"enable_thinking": false}); undefined: none. Their
  // strings count as trusted: pass only the caller's settings here, never user text.
  jinja::Value variables;
  std::optional<std::tm> now;  // what strftime_now formats; unset: the current local time
  jinja::Limits limits;
};

class ChatTemplate {
 public:
  // Parses `source` (throws attn::Error naming `name`, the line and the column when it uses a
  // construct the engine does not support). bos_token / eos_token: the tokenizer's special tokens
  // as transformers passes them (nullopt: the model has none, the variable stays undefined).
  ChatTemplate(std::string_view source, std::string name, std::optional<std::string> bos_token = std::nullopt,
               std::optional<std::string> eos_token = std::nullopt, const jinja::Limits& limits = {});

  TextPieces render(const std::vector<ChatMessage>& messages, const ChatRenderOptions& options = {}) const;
  // Messages as JSON objects (role, content and any other fields a template reads, such as
  // tool_calls), as transformers takes them. Every string in them is the caller's input.
  TextPieces render_json(const json::Value& messages, const ChatRenderOptions& options = {}) const;
  // The pieces joined.
  std::string render_text(const std::vector<ChatMessage>& messages,
                          const ChatRenderOptions& options = {}) const;

  const std::string& name() const { return template_.name(); }

 private:
  TextPieces render_value(jinja::Value messages, const ChatRenderOptions& options) const;
  jinja::Template template_;
  std::optional<std::string> bos_, eos_;
};

}  // namespace attn::text
