// The Jinja engine's evaluator (include/attn/text/jinja.h): runs the syntax tree with Jinja2's
// scoping (a for loop's body is a fresh scope per iteration; namespace() carries values out), its
// Undefined, and Python's operator semantics, writing TextPieces that keep each byte's provenance.
#include <cmath>
#include <limits>
#include <unordered_map>

#include "jinja_internal.h"

namespace attn::text::jinja {

namespace detail {
namespace {

enum class Flow { normal, break_, continue_ };

class Renderer {
 public:
  Renderer(const Program& p, const Value& globals, const RenderOptions& o) : p_(p), globals_(globals) {
    ctx_.options = &o;
    scopes_.emplace_back();
  }

  TextPieces run() {
    TextPieces out;
    out_ = &out;
    exec_body(p_.body);
    return out;
  }

 private:
  using Scope = std::unordered_map<std::string, Value>;

  [[noreturn]] void fail(int line, int col, const std::string& what) const {
    throw LocatedError(where(p_.name, line, col) + what);
  }
  template <typename N>
  [[noreturn]] void fail(const N& n, const std::string& what) const {
    fail(n.line, n.col, what);
  }
  void step(const Expr& e) {
    if (++steps_ > ctx_.options->limits.max_steps)
      fail(e, "the template took more than " + std::to_string(ctx_.options->limits.max_steps) +
                  " steps (Limits::max_steps)");
  }

  // ---- output
  void emit(const std::string& text, bool trusted, int line, int col) {
    if (text.empty()) return;
    out_bytes_ += text.size();
    if (static_cast<int64_t>(out_bytes_) > ctx_.options->limits.max_output_bytes)
      fail(line, col,
           "the output exceeds the limit of " + std::to_string(ctx_.options->limits.max_output_bytes) +
               " bytes (Limits::max_output_bytes)");
    if (!out_->empty() && out_->back().allow_special == trusted)
      out_->back().text += text;
    else
      out_->push_back(TextPiece{text, trusted});
  }
  void emit_str(const StrData& s, int line, int col) {
    std::size_t at = 0;
    for (const Run& r : s.runs) {
      emit(s.text.substr(at, r.len), r.trusted, line, col);
      at += r.len;
    }
  }

  // Renders `body` into a string (macro calls, set blocks), keeping provenance.
  Value capture(const Body& body, const Node& at) {
    TextPieces buf;
    TextPieces* saved = out_;
    const std::size_t saved_bytes = out_bytes_;
    out_ = &buf;
    try {
      exec_body(body);
    } catch (...) {
      out_ = saved;
      throw;
    }
    out_ = saved;
    out_bytes_ = saved_bytes;
    (void)at;
    auto s = std::make_shared<StrData>();
    for (const TextPiece& p : buf) {
      s->text += p.text;
      s->runs.push_back({p.text.size(), p.allow_special});
    }
    return Value::from_str(std::move(s));
  }

  // ---- statements
  Flow exec_body(const Body& body) {
    for (const NodePtr& n : body) {
      const Flow f = exec(*n);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }

  Flow exec(const Node& n) {
    try {
      return exec_node(n);
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& e) {
      fail(n, e.what());
    }
  }

  Flow exec_node(const Node& n) {
    switch (n.kind) {
      case Node::Kind::text:
        emit(n.text, true, n.line, n.col);
        return Flow::normal;
      case Node::Kind::output: {
        const Value v = eval(*n.expr);
        emit_str(*to_str(v), n.line, n.col);
        return Flow::normal;
      }
      case Node::Kind::if_:
        for (const auto& [cond, body] : n.branches)
          if (!cond || truthy(eval(*cond))) return exec_body(body);
        return Flow::normal;
      case Node::Kind::for_:
        exec_for(n);
        return Flow::normal;
      case Node::Kind::set:
        exec_set(n);
        return Flow::normal;
      case Node::Kind::set_block:
        scopes_.back()[n.targets[0]] = capture(n.body, n);
        return Flow::normal;
      case Node::Kind::macro: {
        auto f = std::make_shared<FuncData>();
        f->name = n.name;
        f->macro = &n;
        scopes_.back()[n.name] = Value::from_func(std::move(f));
        return Flow::normal;
      }
      case Node::Kind::break_:
        return Flow::break_;
      case Node::Kind::continue_:
        return Flow::continue_;
      case Node::Kind::block:
        return exec_body(n.body);
    }
    return Flow::normal;
  }

  void bind(Scope& scope, const Node& n, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      scope[targets[0]] = v;
      return;
    }
    std::vector<Value> parts;
    try {
      parts = iterate(v);
    } catch (const Error& e) {
      fail(n, std::string("cannot unpack: ") + e.what());
    }
    if (parts.size() != targets.size())
      fail(n, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                  std::to_string(targets.size()) + " names");
    for (std::size_t i = 0; i < targets.size(); ++i) scope[targets[i]] = parts[i];
  }

  struct ScopeGuard {
    std::vector<Scope>& s;
    explicit ScopeGuard(std::vector<Scope>& v) : s(v) { s.emplace_back(); }
    ~ScopeGuard() { s.pop_back(); }
  };

  void exec_for(const Node& n) {
    const Value seq = eval(*n.expr);
    std::vector<Value> items;
    if (seq.is_undefined()) {
      // an undefined iterable is empty, as in Jinja2
    } else {
      try {
        items = iterate(seq);
      } catch (const Error& e) {
        fail(*n.expr, e.what());
      }
    }
    if (n.filter) {
      std::vector<Value> kept;
      for (const Value& it : items) {
        ScopeGuard g(scopes_);
        bind(scopes_.back(), n, n.targets, it);
        if (truthy(eval(*n.filter))) kept.push_back(it);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (!n.else_body.empty()) exec_body(n.else_body);
      return;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      if (++steps_ > ctx_.options->limits.max_steps) fail(n, "the template took more than the step limit");
      ScopeGuard g(scopes_);
      Value loop = Value::dict();
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(len - i));
      loop.set("revindex0", Value::integer(len - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == len - 1));
      loop.set("length", Value::integer(len));
      loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value());
      loop.set("nextitem", i + 1 < len ? items[static_cast<std::size_t>(i + 1)] : Value());
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      scopes_.back()["loop"] = loop;
      bind(scopes_.back(), n, n.targets, items[static_cast<std::size_t>(i)]);
      if (exec_body(n.body) == Flow::break_) break;
    }
  }

  void exec_set(const Node& n) {
    const Value v = eval(*n.expr);
    if (n.attr_target) {
      const Value obj = lookup(n.targets[0]);
      if (!obj.is_dict() || !obj.dict_data()->is_namespace)
        fail(n, "cannot assign attribute '" + n.targets[1] + "' on '" + n.targets[0] + "' (" +
                    kind_name(obj.kind()) + "); only namespace() objects take attribute assignment");
      if (n.targets[1][0] == '_')
        fail(n, "namespace attribute names may not start with '_'; got '" + n.targets[1] + "'");
      obj.dict_data()->set(n.targets[1], v);
      return;
    }
    bind(scopes_.back(), n, n.targets, v);
  }

  // ---- names
  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    if (const Value* g = globals_.find(name)) return *g;
    if (is_global(name)) {
      auto f = std::make_shared<FuncData>();
      f->name = name;
      return Value::from_func(std::move(f));
    }
    return Value::undefined_named(name);
  }

  [[noreturn]] void undefined_error(const Expr& e, const Value& v) const {
    const std::string& n = v.undefined_name();
    fail(e, n.empty() ? std::string("use of an undefined value") : "'" + n + "' is undefined");
  }

  // ---- expressions
  Value eval(const Expr& e) {
    step(e);
    try {
      return eval_inner(e);
    } catch (const LocatedError&) {
      throw;
    } catch (const Error& err) {
      fail(e, err.what());
    }
  }

  Args eval_args(const Expr& e, std::size_t first) {
    Args a;
    for (std::size_t i = first; i < e.kids.size(); ++i) a.pos.push_back(eval(*e.kids[i]));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v));
    return a;
  }

  Value eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::literal:
        return e.value;
      case Expr::Kind::name:
        return lookup(e.name);
      case Expr::Kind::list: {
        std::vector<Value> items;
        for (const ExprPtr& k : e.kids) items.push_back(eval(*k));
        return e.name == "tuple" ? Value::tuple(std::move(items)) : Value::list(std::move(items));
      }
      case Expr::Kind::dict: {
        Value d = Value::dict();
        for (std::size_t i = 0; i + 1 < e.kids.size(); i += 2) {
          const Value k = eval(*e.kids[i]);
          if (!k.is_string())
            fail(*e.kids[i], std::string("dict keys must be strings; got ") + kind_name(k.kind()));
          d.set(k.str(), eval(*e.kids[i + 1]));
        }
        return d;
      }
      case Expr::Kind::attr: {
        const Value obj = eval(*e.kids[0]);
        if (obj.is_undefined()) undefined_error(e, obj);
        Value r = get_attr(obj, e.name);
        if (r.is_undefined()) r = Value::undefined_named(describe_member(*e.kids[0], e.name));
        return r;
      }
      case Expr::Kind::item: {
        const Value obj = eval(*e.kids[0]);
        if (obj.is_undefined()) undefined_error(e, obj);
        const Value key = eval(*e.kids[1]);
        Value r = get_item(obj, key);
        if (r.is_undefined() && key.is_string())
          r = Value::undefined_named(describe_member(*e.kids[0], key.str()));
        return r;
      }
      case Expr::Kind::slice:
        return eval_slice(e);
      case Expr::Kind::unary:
        return eval_unary(e);
      case Expr::Kind::binary:
        return eval_binary(e);
      case Expr::Kind::and_: {
        Value a = eval(*e.kids[0]);
        return truthy(a) ? eval(*e.kids[1]) : a;
      }
      case Expr::Kind::or_: {
        Value a = eval(*e.kids[0]);
        return truthy(a) ? a : eval(*e.kids[1]);
      }
      case Expr::Kind::compare:
        return eval_compare(e);
      case Expr::Kind::cond:
        if (truthy(eval(*e.kids[1]))) return eval(*e.kids[0]);
        return e.kids[2] ? eval(*e.kids[2]) : Value();
      case Expr::Kind::filter:
        return eval_filter(e);
      case Expr::Kind::test: {
        const Value v = eval(*e.kids[0]);
        const Args a = eval_args(e, 1);
        return Value::boolean(run_test(e.name, v, a) != e.negated);
      }
      case Expr::Kind::call:
        return eval_call(e);
    }
    return Value();
  }

  static std::string describe_member(const Expr& obj, const std::string& name) {
    std::string base = obj.kind == Expr::Kind::name ? obj.name : "value";
    return base + "." + name;
  }

  Value eval_filter(const Expr& e) {
    const Value v = eval(*e.kids[0]);
    const Args a = eval_args(e, 1);
    if (e.name == "default" || e.name == "d") {
      const Value* def = a.get(0, "default_value");
      const Value* boolean = a.get(1, "boolean");
      const bool use = v.is_undefined() || (boolean && truthy(*boolean) && !truthy(v));
      return use ? (def ? *def : Value::text("")) : v;
    }
    // Jinja2's filters take undefined as empty (a string "", a sequence with no items) except these.
    if (v.is_undefined() && (e.name == "tojson" || e.name == "abs" || e.name == "dictsort" ||
                             e.name == "indent" || e.name == "int" || e.name == "float"))
      undefined_error(*e.kids[0], v);
    return run_filter(e.name, v, a, ctx_);
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.kids[0];
    if (callee.kind == Expr::Kind::attr) {
      const Value obj = eval(*callee.kids[0]);
      if (obj.is_undefined()) undefined_error(callee, obj);
      if (is_method(obj, callee.name)) return run_method(obj, callee.name, eval_args(e, 1), ctx_);
      const Value f = get_attr(obj, callee.name);
      if (f.kind() != Value::Kind::function)
        fail(e, "'" + std::string(kind_name(obj.kind())) + "' value has no method '" + callee.name + "'");
      return call_function(e, f, eval_args(e, 1));
    }
    const Value f = eval(callee);
    if (f.is_undefined()) undefined_error(callee, f);
    if (f.kind() != Value::Kind::function)
      fail(e, std::string("a ") + kind_name(f.kind()) + " is not callable");
    return call_function(e, f, eval_args(e, 1));
  }

  Value call_function(const Expr& e, const Value& f, const Args& a) {
    const FuncData& fd = *f.func_data();
    if (!fd.macro) return run_global(fd.name, a, ctx_);
    const Node& m = *fd.macro;
    if (++depth_ > ctx_.options->limits.max_depth)
      fail(e, "macro calls nest deeper than the limit of " + std::to_string(ctx_.options->limits.max_depth));
    Scope params;
    if (a.pos.size() > m.params.size())
      fail(e, "macro '" + m.name + "' takes " + std::to_string(m.params.size()) + " arguments; got " +
                  std::to_string(a.pos.size()));
    for (std::size_t i = 0; i < m.params.size(); ++i) {
      const Value* v = a.get(i, m.params[i].first.c_str());
      params[m.params[i].first] = v ? *v : m.params[i].second ? eval(*m.params[i].second) : Value();
    }
    for (const auto& [k, v] : a.kw) {
      bool known = false;
      for (const auto& p : m.params) known = known || p.first == k;
      if (!known) fail(e, "macro '" + m.name + "' has no parameter '" + k + "'");
    }
    std::vector<Scope> saved = std::move(scopes_);
    scopes_.clear();
    scopes_.push_back(saved.front());
    scopes_.push_back(std::move(params));
    Value r;
    try {
      r = capture(m.body, m);
    } catch (...) {
      scopes_ = std::move(saved);
      --depth_;
      throw;
    }
    scopes_ = std::move(saved);
    --depth_;
    return r;
  }

  Value eval_slice(const Expr& e) {
    const Value obj = eval(*e.kids[0]);
    if (obj.is_undefined()) undefined_error(e, obj);
    int64_t part[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int i = 0; i < 3; ++i) {
      if (!e.kids[static_cast<std::size_t>(i) + 1]) continue;
      const Value v = eval(*e.kids[static_cast<std::size_t>(i) + 1]);
      if (v.is_none()) continue;
      if (v.kind() != Value::Kind::integer)
        fail(e, std::string("slice indices must be integers; got ") + kind_name(v.kind()));
      part[i] = v.as_int();
      given[i] = true;
    }
    const int64_t step = part[2];
    if (step == 0) fail(e, "slice step cannot be zero");
    std::vector<std::size_t> starts;
    int64_t n = 0;
    if (obj.is_string()) {
      starts = code_point_starts(obj.str());
      n = static_cast<int64_t>(starts.size());
    } else if (obj.is_list() && subscriptable(obj)) {
      n = static_cast<int64_t>(obj.items().size());
    } else {
      fail(e, std::string("a ") + (obj.is_list() ? "generator or dict view" : kind_name(obj.kind())) +
                  " is not subscriptable");
    }
    // Python's slice.indices.
    const auto clamp = [&](int64_t v, bool is_given, int64_t def) {
      if (!is_given) return def;
      if (v < 0) v += n;
      if (step > 0) return std::min(std::max<int64_t>(v, 0), n);
      return std::min(std::max<int64_t>(v, -1), n - 1);
    };
    const int64_t start = clamp(part[0], given[0], step > 0 ? 0 : n - 1);
    const int64_t stop = clamp(part[1], given[1], step > 0 ? n : -1);
    std::vector<int64_t> idx;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) idx.push_back(i);
    if (obj.is_list()) {
      std::vector<Value> out;
      for (int64_t i : idx) out.push_back(obj.items()[static_cast<std::size_t>(i)]);
      return make_seq(std::move(out), seq_of(obj));
    }
    const std::string& s = obj.str();
    std::string out;
    for (int64_t i : idx) {
      const std::size_t b = starts[static_cast<std::size_t>(i)];
      const std::size_t en = static_cast<std::size_t>(i) + 1 < starts.size()
                                 ? starts[static_cast<std::size_t>(i) + 1]
                                 : s.size();
      out.append(s, b, en - b);
    }
    return derived_str(std::move(out), obj);
  }

  Value eval_unary(const Expr& e) {
    const Value v = eval(*e.kids[0]);
    if (e.name == "not") return Value::boolean(!truthy(v));
    if (v.is_undefined()) undefined_error(*e.kids[0], v);
    if (v.kind() == Value::Kind::integer) return e.name == "-" ? Value::integer(-v.as_int()) : v;
    if (v.kind() == Value::Kind::number) return e.name == "-" ? Value::number(-v.as_double()) : v;
    if (v.kind() == Value::Kind::boolean)
      return Value::integer(e.name == "-" ? -int64_t(v.as_bool()) : v.as_bool());
    fail(e, "bad operand type for unary " + e.name + ": " + kind_name(v.kind()));
  }

  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);

  const Program& p_;
  const Value& globals_;
  Ctx ctx_;
  std::vector<Scope> scopes_;
  TextPieces* out_ = nullptr;
  std::size_t out_bytes_ = 0;
  int64_t steps_ = 0;
  int depth_ = 0;
};

bool is_num(const Value& v) {
  return v.kind() == Value::Kind::integer || v.kind() == Value::Kind::number ||
         v.kind() == Value::Kind::boolean;
}
double num(const Value& v) {
  return v.kind() == Value::Kind::number    ? v.as_double()
         : v.kind() == Value::Kind::integer ? static_cast<double>(v.as_int())
                                            : static_cast<double>(v.as_bool());
}
bool is_int(const Value& v) { return v.kind() == Value::Kind::integer || v.kind() == Value::Kind::boolean; }
int64_t int_of(const Value& v) {
  return v.kind() == Value::Kind::integer ? v.as_int() : int64_t(v.as_bool());
}

Value repeat(const Value& s, int64_t times, const Ctx& ctx) {
  if (times <= 0) return s.is_list() ? make_seq({}, seq_of(s)) : derived_str("", s);
  if (s.is_list()) {
    ctx.check_size(s.items().size() * static_cast<std::size_t>(times));
    std::vector<Value> out;
    for (int64_t i = 0; i < times; ++i) out.insert(out.end(), s.items().begin(), s.items().end());
    return make_seq(std::move(out), seq_of(s));
  }
  ctx.check_size(s.str().size() * static_cast<std::size_t>(times));
  std::string out;
  for (int64_t i = 0; i < times; ++i) out += s.str();
  return derived_str(std::move(out), s);
}

Value Renderer::eval_binary(const Expr& e) {
  const Value a = eval(*e.kids[0]);
  const Value b = eval(*e.kids[1]);
  const std::string& op = e.name;
  if (op == "~") {
    const auto sa = to_str(a), sb = to_str(b);
    ctx_.check_size(sa->text.size() + sb->text.size());
    return Value::from_str(concat_str(*sa, *sb));
  }
  if (a.is_undefined()) undefined_error(*e.kids[0], a);
  if (b.is_undefined()) undefined_error(*e.kids[1], b);
  const auto type_error = [&]() {
    fail(e,
         "unsupported operand types for " + op + ": " + kind_name(a.kind()) + " and " + kind_name(b.kind()));
  };
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      ctx_.check_size(a.str().size() + b.str().size());
      return Value::from_str(concat_str(*a.str_data(), *b.str_data()));
    }
    if (a.is_list() && b.is_list()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      ctx_.check_size(out.size());
      return Value::list(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || (a.is_list() && subscriptable(a))) && is_int(b)) return repeat(a, int_of(b), ctx_);
    if (is_int(a) && (b.is_string() || (b.is_list() && subscriptable(b)))) return repeat(b, int_of(a), ctx_);
  }
  if (!is_num(a) || !is_num(b)) type_error();
  if (is_int(a) && is_int(b) && op != "/") {
    const int64_t x = int_of(a), y = int_of(b);
    int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value::integer(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value::integer(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value::integer(r);
    if (op == "//" || op == "%") {
      if (y == 0) fail(e, "integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) fail(e, "integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**" && y >= 0) {
      r = 1;
      for (int64_t i = 0; i < y; ++i)
        if (__builtin_mul_overflow(r, x, &r)) fail(e, "integer overflow in **");
      return Value::integer(r);
    }
    if (op != "**") fail(e, "integer overflow in " + op);
  }
  const double x = num(a), y = num(b);
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "/") {
    if (y == 0) fail(e, "division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) fail(e, "float division or modulo by zero");
    // CPython's float_divmod.
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) {
        mod += y;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, y);
    }
    double fd = std::copysign(0.0, x / y);
    if (div != 0) {
      fd = std::floor(div);
      if (div - fd > 0.5) fd += 1.0;
    }
    return Value::number(op == "%" ? mod : fd);
  }
  if (op == "**") return Value::number(std::pow(x, y));
  type_error();
  return Value();
}

bool contains(const Value& hay, const Value& needle) {
  if (hay.is_undefined()) return false;
  if (hay.is_string()) {
    if (!needle.is_string())
      throw Error(std::string("'in <string>' requires a string as left operand, not ") +
                  kind_name(needle.kind()));
    return hay.str().find(needle.str()) != std::string::npos;
  }
  if (hay.is_list()) {
    for (const Value& v : hay.items())
      if (values_equal(v, needle)) return true;
    return false;
  }
  if (hay.is_dict()) return needle.is_string() && hay.find(needle.str()) != nullptr;
  throw Error(std::string("argument of type ") + kind_name(hay.kind()) + " is not iterable");
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (std::size_t i = 0; i < e.ops.size(); ++i) {
    const Value right = eval(*e.kids[i + 1]);
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==")
      r = values_equal(left, right);
    else if (op == "!=")
      r = !values_equal(left, right);
    else if (op == "in")
      r = contains(right, left);
    else if (op == "not in")
      r = !contains(right, left);
    else {
      if (left.is_undefined()) undefined_error(*e.kids[i], left);
      if (right.is_undefined()) undefined_error(*e.kids[i + 1], right);
      const int c = compare_values(left, right);
      r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = right;
  }
  return Value::boolean(true);
}

}  // namespace
}  // namespace detail

Template::Template(std::string_view source, std::string name, const Limits& limits)
    : name_(std::move(name)), program_(detail::parse_template(source, name_, limits)) {}

TextPieces Template::render_pieces(const Value& globals, const RenderOptions& options) const {
  ATTN_CHECK(globals.is_dict() || globals.is_undefined(), "template '", name_,
             "': the variables must be a dict; got ", detail::kind_name(globals.kind()));
  const Value vars = globals.is_dict() ? globals : Value::dict();
  detail::Renderer r(*program_, vars, options);
  return r.run();
}

std::string Template::render(const Value& globals, const RenderOptions& options) const {
  return join_pieces(render_pieces(globals, options));
}

}  // namespace attn::text::jinja
