// Internals of the Jinja engine (include/attn/text/jinja.h): value storage, the syntax tree, and the
// helpers its files share. Not a public header.
#pragma once

#include <attn/core/error.h>
#include <attn/text/jinja.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace attn::text::jinja::detail {

// A string and, per run of bytes, whether the run comes from the template side (trusted).
struct Run {
  std::size_t len = 0;
  bool trusted = false;
};
struct StrData {
  std::string text;
  std::vector<Run> runs;  // lengths sum to text.size(); adjacent runs differ in `trusted`
  bool all_trusted() const {
    for (const Run& r : runs)
      if (!r.trusted) return false;
    return true;
  }
};
std::shared_ptr<const StrData> make_str(std::string text, bool trusted);
// a + b, keeping each byte's provenance.
std::shared_ptr<const StrData> concat_str(const StrData& a, const StrData& b);

// Values nest at most this deep (lists and dicts in lists and dicts), so that printing, comparing and
// freeing them never recurses without bound.
constexpr int kMaxValueDepth = 512;
int value_depth(const Value& v);  // 0 for scalars
// Whether v is or holds a namespace(). Namespaces, the only values a template can change, never hold
// one, so no value can contain itself.
bool holds_namespace(const Value& v);

// What Python type a sequence stands for: Jinja2's map / select / items filters give generators
// (always true, no length, not printable), dict.items() / keys() / values() give views (printed
// dict_items([...]), not subscriptable).
enum class Seq : uint8_t { list, tuple, generator, dict_items, dict_keys, dict_values };

struct ListData {
  std::vector<Value> items;
  Seq seq = Seq::list;
  int depth = 1;
  bool has_namespace = false;
};
struct DictData {
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, std::size_t> index;
  bool is_namespace = false;  // namespace(): attributes may be assigned with {% set ns.x = ... %}
  int depth = 1;
  bool has_namespace = false;  // an entry holds a namespace
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct Node;
struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

// A callable value: a template global (range, namespace, raise_exception, strftime_now, ...) or a
// macro defined by the template.
struct FuncData {
  std::string name;
  const Node* macro = nullptr;  // null: the built-in `name`
};

struct Expr {
  enum class Kind {
    literal,  // value
    name,     // name
    list,     // kids: elements
    dict,     // kids: key, value, key, value, ...
    attr,     // kids[0].name
    item,     // kids[0][kids[1]]
    slice,    // kids[0][kids[1]:kids[2]:kids[3]] (missing parts null)
    unary,    // name: "-", "+", "not"
    binary,   // name: + - * / // % ** ~ in "not in"
    and_,     // kids[0] and kids[1]
    or_,      // kids[0] or kids[1]
    compare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ...
    cond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
    filter,   // kids[0] | name(kids[1..], kwargs)
    test,     // kids[0] is [not] name(kids[1..])
    call,     // kids[0](kids[1..], kwargs)
  };
  Kind kind = Kind::literal;
  int line = 0, col = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  int depth = 1;  // of this subtree (the parser bounds it: evaluation recurses along it)
};

struct Node {
  enum class Kind { text, output, if_, for_, set, set_block, macro, break_, continue_, block };
  Kind kind = Kind::text;
  int line = 0, col = 0;
  std::string text;                                     // text: the template's literal bytes
  ExprPtr expr;                                         // output / set value / for iterable
  std::vector<std::pair<ExprPtr, Body>> branches;       // if / elif / else (else: null condition)
  std::vector<std::string> targets;                     // for / set names; set ns.attr: {ns, attr}
  bool attr_target = false;                             // set ns.attr = ...
  ExprPtr filter;                                       // for ... if filter
  Body body, else_body;                                 // for body / else; set block; macro; block
  std::string name;                                     // macro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters (default may be null)
};

struct Program {
  std::string name;
  Body body;
};

// Parses the template (jinja_parse.cc).
std::shared_ptr<const Program> parse_template(std::string_view source, const std::string& name,
                                              const Limits& limits);

// "template 'NAME' line L column C: " (column omitted when 0).
std::string where(const std::string& name, int line, int col);

// ---- value helpers (jinja_value.cc)
const char* kind_name(Value::Kind k);
bool truthy(const Value& v);
// Python's str() of a value (what {{ }} prints); provenance kept for strings, containers derived.
std::shared_ptr<const StrData> to_str(const Value& v);
// Python's repr() text.
std::string repr(const Value& v);
std::string python_float(double d);
// transformers' tojson: json.dumps(ensure_ascii=False, indent=..., sort_keys=...). Throws on values
// JSON cannot hold (undefined, callables).
void to_json(std::string& out, const Value& v, int indent, bool sort_keys, int level);
bool values_equal(const Value& a, const Value& b);
bool all_trusted(const Value& v);  // every string inside comes from the template side

// ---- UTF-8 as Python code points
std::vector<std::size_t> code_point_starts(std::string_view s);  // byte offset of each code point
std::size_t code_point_count(std::string_view s);
bool is_py_space(char32_t c);
std::string py_strip(std::string_view s, std::string_view chars, bool has_chars, bool left, bool right);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace attn::text::jinja::detail

namespace attn::text::jinja::detail {

// An error that already names the template position (the evaluator adds it once).
class LocatedError : public Error {
 public:
  explicit LocatedError(const std::string& what) : Error(what) {}
};

// Arguments of a filter, test, method or global call.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position i or named `name`; nullptr when absent.
  const Value* get(std::size_t i, const char* name) const {
    if (i < pos.size()) return &pos[i];
    for (const auto& [k, v] : kw)
      if (k == name) return &v;
    return nullptr;
  }
};

struct Ctx {
  const RenderOptions* options = nullptr;
  // Throws when a string or list built by the template would exceed the output limit.
  void check_size(std::size_t n) const {
    if (static_cast<int64_t>(n) > options->limits.max_output_bytes)
      throw Error(::attn::detail::concat("a value of ", n, " bytes/items exceeds the output limit of ",
                                         options->limits.max_output_bytes));
  }
};

// ---- built-ins (jinja_builtins.cc, jinja_filters.cc)
Value run_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c);
bool run_test(const std::string& name, const Value& v, const Args& a);
bool is_method(const Value& obj, const std::string& name);
Value run_method(const Value& obj, const std::string& name, const Args& a, const Ctx& c);
bool is_global(const std::string& name);
Value run_global(const std::string& name, const Args& a, const Ctx& c);
// obj.name / obj[key] for a defined obj: a missing member is undefined, as in Jinja2.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// Python's iteration: list items, dict keys, string characters; throws for other values.
std::vector<Value> iterate(const Value& v);
// <0, 0, >0 as Python orders numbers, strings and lists; throws for other pairs.
int compare_values(const Value& a, const Value& b);
// String pieces of a value derived from `src` (provenance: trusted only if all of src was).
Value derived_str(std::string text, const Value& src);
// A list standing for another Python sequence type (Seq).
Value make_seq(std::vector<Value> items, Seq seq);
inline Seq seq_of(const Value& v) { return v.is_list() ? v.list_data()->seq : Seq::list; }
inline bool subscriptable(const Value& v) { return seq_of(v) == Seq::list || seq_of(v) == Seq::tuple; }

}  // namespace attn::text::jinja::detail
