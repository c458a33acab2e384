// attn's own Jinja engine for chat templates (docs/chat_templates.md): the subset of Jinja2 that the
// models' chat templates use, rendered as transformers' apply_chat_template renders them
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; transformers'
// tojson; raise_exception and strftime_now). Debian has no C++ Jinja library.
//
// Rendering keeps provenance: the result is text::TextPieces, where bytes from the template's own text
// (and the variables the caller marks as trusted, such as bos_token) allow special tokens and bytes
// derived from the caller's input (message contents, and every string computed from them) do not.
//
// Every construct outside the subset, and every error while rendering, throws attn::Error naming the
// template, the line and column, and what was found. Hostile templates meet limits on nesting depth,
// output size and work (Limits).
#pragma once

#include <attn/text/text_piece.h>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::json {
class Value;
}

namespace attn::text::jinja {

namespace detail {
struct StrData;
struct ListData;
struct DictData;
struct FuncData;
struct Program;
}  // namespace detail

// A template value: undefined (Jinja2's default Undefined), none, bool, int, float, string (with its
// provenance per byte run), list, dict (insertion ordered, string keys) or a callable (macros and the
// template globals). Lists and dicts are shared, as in Python; templates cannot mutate them.
class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, number, string, list, dict, function };

  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  // A string from the template side (literal text, or a variable the caller trusts, e.g. bos_token):
  // special-token strings in it may become special tokens.
  static Value text(std::string s);
  // A string from the caller's input (message contents): never special tokens.
  static Value input(std::string s);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);  // a Python tuple (items(), (a, b))
  static Value dict();
  // A JSON document as a value: strings are input (or text when trusted), objects dicts, arrays lists.
  static Value from_json(const json::Value& v, bool trusted = false);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_list() const { return kind_ == Kind::list; }
  bool is_dict() const { return kind_ == Kind::dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return d_; }
  // The string's bytes (empty for non-strings).
  const std::string& str() const;
  // Whether every byte of the string comes from the template side.
  bool str_trusted() const;
  const std::vector<Value>& items() const;                            // list elements
  const std::vector<std::pair<std::string, Value>>& entries() const;  // dict entries, in order
  const Value* find(std::string_view key) const;                      // dict lookup; nullptr if absent
  // Building: appends to a list / sets a dict key (keeps the first position of an existing key).
  void push_back(Value v);
  void set(const std::string& key, Value v);

  // Internal representation (used by the engine's own files).
  const std::shared_ptr<const detail::StrData>& str_data() const { return s_; }
  const std::shared_ptr<detail::ListData>& list_data() const { return l_; }
  const std::shared_ptr<detail::DictData>& dict_data() const { return m_; }
  const std::shared_ptr<const detail::FuncData>& func_data() const { return f_; }
  static Value from_str(std::shared_ptr<const detail::StrData> s);
  static Value from_func(std::shared_ptr<const detail::FuncData> f);
  static Value from_dict(std::shared_ptr<detail::DictData> m);
  static Value undefined_named(std::string name);  // undefined that remembers what was looked up
  const std::string& undefined_name() const;

 private:
  Kind kind_ = Kind::undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const detail::StrData> s_;  // string; for undefined, its name
  std::shared_ptr<detail::ListData> l_;
  std::shared_ptr<detail::DictData> m_;
  std::shared_ptr<const detail::FuncData> f_;
};

// Guards against hostile templates and inputs. Exceeding one throws attn::Error naming the limit.
struct Limits {
  int max_depth = 64;                    // nesting of blocks and expressions; macro call depth
  int64_t max_output_bytes = 16 << 20;   // rendered output, and any one string or list built
  int64_t max_steps = 20'000'000;        // loop iterations + expression evaluations
  int64_t max_template_bytes = 1 << 20;  // the template source itself
};

struct RenderOptions {
  Limits limits;
  // The time strftime_now formats (local time); unset: the current local time.
  std::optional<std::tm> now;
};

class Template {
 public:
  // Parses `source`; `name` names it in every error. Throws attn::Error on a syntax error or a
  // construct the engine does not support.
  explicit Template(std::string_view source, std::string name = "template", const Limits& limits = {});

  // Renders with `globals` (a dict: messages, add_generation_prompt, bos_token, ...) as the
  // template's variables.
  TextPieces render_pieces(const Value& globals, const RenderOptions& options = {}) const;
  // The pieces joined.
  std::string render(const Value& globals, const RenderOptions& options = {}) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const detail::Program> program_;
};

// The pieces' text joined (text/text_piece.h).
using text::join_pieces;

}  // namespace attn::text::jinja
