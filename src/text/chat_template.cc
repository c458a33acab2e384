// A model's chat template rendered as transformers renders it (include/attn/text/chat_template.h).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/text/chat_template.h>

namespace attn::text {

ChatTemplate::ChatTemplate(std::string_view source, std::string name, std::optional<std::string> bos_token,
                           std::optional<std::string> eos_token, const jinja::Limits& limits)
    : template_(source, std::move(name), limits), bos_(std::move(bos_token)), eos_(std::move(eos_token)) {}

TextPieces ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                const ChatRenderOptions& options) const {
  jinja::Value list = jinja::Value::list();
  for (const ChatMessage& m : messages) {
    jinja::Value msg = jinja::Value::dict();
    msg.set("role", jinja::Value::input(m.role));
    msg.set("content", jinja::Value::input(m.content));
    list.push_back(std::move(msg));
  }
  return render_value(std::move(list), options);
}

TextPieces ChatTemplate::render_json(const json::Value& messages, const ChatRenderOptions& options) const {
  ATTN_CHECK(messages.is_array(), "chat template ", name(), ": messages must be a JSON array; got ",
             json::type_name(messages.type()));
  for (std::size_t i = 0; i < messages.size(); ++i)
    ATTN_CHECK(messages.at(i).is_object(), "chat template ", name(), ": message ", i,
               " must be an object; got ", json::type_name(messages.at(i).type()));
  return render_value(jinja::Value::from_json(messages), options);
}

std::string ChatTemplate::render_text(const std::vector<ChatMessage>& messages,
                                      const ChatRenderOptions& options) const {
  return jinja::join_pieces(render(messages, options));
}

TextPieces ChatTemplate::render_value(jinja::Value messages, const ChatRenderOptions& options) const {
  jinja::Value vars = jinja::Value::dict();
  vars.set("messages", std::move(messages));
  vars.set("tools", jinja::Value::none());
  vars.set("documents", jinja::Value::none());
  vars.set("add_generation_prompt", jinja::Value::boolean(options.add_generation_prompt));
  if (bos_) vars.set("bos_token", jinja::Value::text(*bos_));
  if (eos_) vars.set("eos_token", jinja::Value::text(*eos_));
  if (options.variables.is_dict())
    for (const auto& [k, v] : options.variables.entries()) vars.set(k, v);
  else
    ATTN_CHECK(options.variables.is_undefined(), "chat template ", name(),
               ": ChatRenderOptions::variables must be a dict; got another value");
  jinja::RenderOptions ro;
  ro.limits = options.limits;
  ro.now = options.now;
  return template_.render_pieces(vars, ro);
}

}  // namespace attn::text
