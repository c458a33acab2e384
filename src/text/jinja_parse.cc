// The Jinja engine's parser (include/attn/text/jinja.h): tokens to the syntax tree of
// jinja_internal.h, following Jinja2's grammar and operator precedence. Constructs outside the
// supported subset are refused here, naming the line and column.
#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>

#include "jinja_internal.h"
#include "jinja_lex.h"

namespace attn::text::jinja::detail {

namespace {

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string& name, const Limits& limits)
      : t_(std::move(toks)), name_(name), limits_(limits) {}

  Body parse_all() {
    Body body = parse_body({});
    return body;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return t_[i_]; }
  const Token& peek(std::size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().kind == Tok::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Tok::name && cur().text == n; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    throw Error(where(name_, at.line, at.col) + what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Tok::text:
        return "template text";
      case Tok::block_end:
        return "end of tag '%}'";
      case Tok::var_end:
        return "end of tag '}}'";
      case Tok::block_begin:
        return "'{%'";
      case Tok::var_begin:
        return "'{{'";
      case Tok::eof:
        return "end of template";
      case Tok::string:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur(), std::string("expected '") + op + "'; found " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().kind != Tok::name) fail(cur(), "expected a name; found " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != Tok::block_end) fail(cur(), "expected end of tag '%}'; found " + describe(cur()));
    next();
  }
  struct DepthGuard {
    int& d;
    DepthGuard(Parser& p, const Token& at) : d(p.depth_) {
      if (++d > p.limits_.max_depth)
        p.fail(at, "nesting deeper than the limit of " + std::to_string(p.limits_.max_depth) + " levels");
    }
    ~DepthGuard() { --d; }
  };

  ExprPtr make(Expr::Kind k, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = at.line;
    e->col = at.col;
    return e;
  }

  // Sets e's subtree depth and bounds it: evaluation recurses along it.
  ExprPtr fin(ExprPtr e) {
    int d = 0;
    for (const ExprPtr& k : e->kids)
      if (k) d = std::max(d, k->depth);
    for (const auto& kw : e->kwargs) d = std::max(d, kw.second->depth);
    e->depth = d + 1;
    if (e->depth > 4 * limits_.max_depth)
      throw Error(where(name_, e->line, e->col) + "an expression nests deeper than the limit of " +
                  std::to_string(4 * limits_.max_depth) + " levels");
    return e;
  }

  // ---- statements
  // Parses nodes until a block tag whose keyword is in `ends` (left current: the keyword).
  Body parse_body(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == Tok::eof) {
        if (!ends.empty()) {
          std::string want = *ends.begin();
          for (const std::string& e : ends)
            if (e.rfind("end", 0) == 0) want = e;
          fail(t, "unexpected end of template; expected {% " + want + " %}");
        }
        return body;
      }
      if (t.kind == Tok::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::text;
        n->line = t.line;
        n->col = t.col;
        n->text = t.text;
        body.push_back(std::move(n));
        next();
        continue;
      }
      if (t.kind == Tok::var_begin) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::output;
        n->line = t.line;
        n->col = t.col;
        n->expr = parse_expression();
        if (cur().kind != Tok::var_end) fail(cur(), "expected end of tag '}}'; found " + describe(cur()));
        next();
        body.push_back(std::move(n));
        continue;
      }
      if (t.kind != Tok::block_begin) fail(t, "unexpected " + describe(t));
      const Token& kw = peek();
      if (kw.kind != Tok::name) fail(kw, "expected a tag name after '{%'; found " + describe(kw));
      if (ends.count(kw.text)) {
        next();  // {%; the keyword stays current
        return body;
      }
      next();
      body.push_back(parse_statement());
    }
  }

  NodePtr new_node(Node::Kind k, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  NodePtr parse_statement() {
    const Token& kw = cur();
    DepthGuard g(*this, kw);
    const std::string& w = kw.text;
    if (w == "if") return parse_if();
    if (w == "for") return parse_for();
    if (w == "set") return parse_set();
    if (w == "macro") return parse_macro();
    if (w == "break" || w == "continue") {
      NodePtr n = new_node(w == "break" ? Node::Kind::break_ : Node::Kind::continue_, kw);
      next();
      if (loops_ == 0) fail(kw, "'" + w + "' outside a for loop");
      expect_block_end();
      return n;
    }
    if (w == "generation") {  // transformers' {% generation %} marks assistant text; it renders its body
      NodePtr n = new_node(Node::Kind::block, kw);
      next();
      expect_block_end();
      n->body = parse_body({"endgeneration"});
      next();
      expect_block_end();
      return n;
    }
    static const std::set<std::string> known = {"include", "import",   "from",   "extends",      "block",
                                                "call",    "filter",   "with",   "autoescape",   "do",
                                                "trans",   "elif",     "else",   "endif",        "endfor",
                                                "endset",  "endmacro", "endraw", "endgeneration"};
    if (known.count(w))
      fail(kw, "unsupported or misplaced tag '{% " + w +
                   " %}' (attn's Jinja engine supports if, for, set, "
                   "macro, break, continue, raw and generation)");
    fail(kw, "unknown tag '{% " + w + " %}'");
  }

  NodePtr parse_if() {
    NodePtr n = new_node(Node::Kind::if_, cur());
    next();
    ExprPtr cond = parse_condition();
    expect_block_end();
    while (true) {
      Body body = parse_body({"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      const std::string kw = next().text;
      if (kw == "elif") {
        cond = parse_condition();
        expect_block_end();
        continue;
      }
      if (kw == "else") {
        expect_block_end();
        n->branches.emplace_back(nullptr, parse_body({"endif"}));
        next();
      }
      expect_block_end();
      return n;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (cur().kind != Tok::name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  NodePtr parse_for() {
    NodePtr n = new_node(Node::Kind::for_, cur());
    next();
    n->targets = parse_targets();
    if (!is_name("in")) fail(cur(), "expected 'in' in the for tag; found " + describe(cur()));
    next();
    n->expr = parse_or();  // no conditional expression here: `if` starts the loop filter
    if (is_name("if")) {
      next();
      n->filter = parse_expression();
    }
    if (is_name("recursive")) fail(cur(), "recursive for loops are not supported");
    expect_block_end();
    ++loops_;
    n->body = parse_body({"else", "endfor"});
    --loops_;
    if (next().text == "else") {
      expect_block_end();
      n->else_body = parse_body({"endfor"});
      next();
    }
    expect_block_end();
    return n;
  }

  NodePtr parse_set() {
    NodePtr n = new_node(Node::Kind::set, cur());
    next();
    const std::string first = expect_name();
    if (is_op(".")) {
      next();
      n->attr_target = true;
      n->targets = {first, expect_name()};
    } else {
      n->targets = {first};
      while (is_op(",")) {
        next();
        n->targets.push_back(expect_name());
      }
    }
    if (cur().kind == Tok::block_end && !n->attr_target && n->targets.size() == 1) {
      next();
      n->kind = Node::Kind::set_block;
      n->body = parse_body({"endset"});
      next();
      expect_block_end();
      return n;
    }
    if (is_op("|")) fail(cur(), "filtered set blocks ({% set x | filter %}) are not supported");
    expect_op("=");
    n->expr = parse_tuple_or_expression();
    expect_block_end();
    return n;
  }

  NodePtr parse_macro() {
    NodePtr n = new_node(Node::Kind::macro, cur());
    next();
    n->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      std::string p = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expression();
      }
      n->params.emplace_back(std::move(p), std::move(def));
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
    expect_block_end();
    const int saved = loops_;
    loops_ = 0;
    n->body = parse_body({"endmacro"});
    loops_ = saved;
    next();
    if (cur().kind == Tok::name && cur().text == n->name) next();
    expect_block_end();
    return n;
  }

  // ---- expressions
  // `a, b` without brackets (set's value) is a list.
  ExprPtr parse_tuple_or_expression() {
    const Token& at = cur();
    ExprPtr e = parse_expression();
    if (!is_op(",")) return e;
    ExprPtr l = make(Expr::Kind::list, at);
    l->name = "tuple";
    l->kids.push_back(std::move(e));
    while (is_op(",")) {
      next();
      if (cur().kind == Tok::block_end) break;
      l->kids.push_back(parse_expression());
    }
    return fin(std::move(l));
  }

  // An if / elif condition: as in Jinja2, no conditional expression (`a if b else c`) at its top.
  ExprPtr parse_condition() {
    DepthGuard g(*this, cur());
    return parse_or();
  }

  ExprPtr parse_expression() {
    DepthGuard g(*this, cur());
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Token& at = next();
      ExprPtr c = make(Expr::Kind::cond, at);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        next();
        other = parse_expression();
      }
      c->kids.push_back(std::move(e));
      c->kids.push_back(std::move(cond));
      c->kids.push_back(std::move(other));
      e = fin(std::move(c));
    }
    return e;
  }

  ExprPtr binary(Expr::Kind k, const Token& at, ExprPtr a, ExprPtr b, std::string op = {}) {
    ExprPtr e = make(k, at);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return fin(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Token& at = next();
      e = binary(Expr::Kind::or_, at, std::move(e), parse_and());
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Token& at = next();
      e = binary(Expr::Kind::and_, at, std::move(e), parse_not());
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this, cur());
      const Token& at = next();
      ExprPtr e = make(Expr::Kind::unary, at);
      e->name = "not";
      e->kids.push_back(parse_not());
      return fin(std::move(e));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const Token& at = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().kind == Tok::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().kind == Tok::name && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::compare, at);
        cmp->kids.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->kids.push_back(parse_math1());
    }
    return cmp ? fin(std::move(cmp)) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      e = binary(Expr::Kind::binary, at, std::move(e), parse_concat(), at.text);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Token& at = next();
      e = binary(Expr::Kind::binary, at, std::move(e), parse_math2(), "~");
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      e = binary(Expr::Kind::binary, at, std::move(e), parse_pow(), at.text);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Token& at = next();
      e = binary(Expr::Kind::binary, at, std::move(e), parse_unary(true), "**");
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this, cur());
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      e = make(Expr::Kind::unary, at);
      e->name = at.text;
      e->kids.push_back(parse_unary(false));
      e = fin(std::move(e));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case Tok::name: {
        next();
        ExprPtr e = make(Expr::Kind::literal, t);
        if (t.text == "true" || t.text == "True")
          e->value = Value::boolean(true);
        else if (t.text == "false" || t.text == "False")
          e->value = Value::boolean(false);
        else if (t.text == "none" || t.text == "None")
          e->value = Value::none();
        else {
          e->kind = Expr::Kind::name;
          e->name = t.text;
        }
        return e;
      }
      case Tok::string: {
        std::string s;
        while (cur().kind == Tok::string) s += next().text;  // adjacent literals join
        ExprPtr e = make(Expr::Kind::literal, t);
        e->value = Value::text(std::move(s));
        return e;
      }
      case Tok::integer: {
        next();
        ExprPtr e = make(Expr::Kind::literal, t);
        int64_t v = 0;
        const auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (r.ec != std::errc()) fail(t, "integer literal " + t.text + " does not fit in 64 bits");
        e->value = Value::integer(v);
        return e;
      }
      case Tok::number: {
        next();
        ExprPtr e = make(Expr::Kind::literal, t);
        e->value = Value::number(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case Tok::op:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail(t, "expected an expression; found " + describe(t));
  }

  ExprPtr parse_paren() {
    const Token& at = next();
    if (is_op(")")) {
      next();
      ExprPtr t = make(Expr::Kind::list, at);
      t->name = "tuple";
      return t;
    }
    ExprPtr e = parse_expression();
    if (is_op(",")) {  // a tuple
      ExprPtr l = make(Expr::Kind::list, at);
      l->name = "tuple";
      l->kids.push_back(std::move(e));
      while (is_op(",")) {
        next();
        if (is_op(")")) break;
        l->kids.push_back(parse_expression());
      }
      e = fin(std::move(l));
    }
    expect_op(")");
    return e;
  }
  ExprPtr parse_list() {
    ExprPtr l = make(Expr::Kind::list, next());
    while (!is_op("]")) {
      l->kids.push_back(parse_expression());
      if (!is_op(",")) break;
      next();
    }
    expect_op("]");
    return fin(std::move(l));
  }
  ExprPtr parse_dict() {
    ExprPtr d = make(Expr::Kind::dict, next());
    while (!is_op("}")) {
      d->kids.push_back(parse_expression());
      expect_op(":");
      d->kids.push_back(parse_expression());
      if (!is_op(",")) break;
      next();
    }
    expect_op("}");
    return fin(std::move(d));
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        const Token& at = next();
        if (cur().kind == Tok::integer) {  // x.0 is x[0]
          ExprPtr idx = make(Expr::Kind::literal, cur());
          idx->value = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
          e = binary(Expr::Kind::item, at, std::move(e), std::move(idx));
          continue;
        }
        ExprPtr a = make(Expr::Kind::attr, at);
        a->name = expect_name();
        a->kids.push_back(std::move(e));
        e = fin(std::move(a));
      } else if (is_op("[")) {
        e = parse_subscript(std::move(e));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    const Token& at = next();
    ExprPtr parts[3];
    int n = 0;
    bool slice = false;
    while (true) {
      if (is_op(":")) {
        slice = true;
        next();
        if (++n > 2) fail(at, "a slice has at most three parts");
        continue;
      }
      if (is_op("]")) break;
      if (parts[n]) fail(cur(), "expected ':' or ']'; found " + describe(cur()));
      parts[n] = parse_expression();
      if (is_op(",")) fail(cur(), "tuple subscripts are not supported");
    }
    next();
    if (!slice) {
      if (!parts[0]) fail(at, "empty subscript []");
      return binary(Expr::Kind::item, at, std::move(obj), std::move(parts[0]));
    }
    ExprPtr s = make(Expr::Kind::slice, at);
    s->kids.push_back(std::move(obj));
    for (auto& p : parts) s->kids.push_back(std::move(p));
    return fin(std::move(s));
  }

  // Arguments of a call, filter or test: positional, then name=value.
  void parse_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail(cur(), "*args and **kwargs in calls are not supported");
      if (cur().kind == Tok::name && peek().kind == Tok::op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e.kwargs.empty()) fail(cur(), "a positional argument after a keyword argument");
        e.kids.push_back(parse_expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    ExprPtr c = make(Expr::Kind::call, cur());
    c->kids.push_back(std::move(callee));
    parse_args(*c);
    return fin(std::move(c));
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".")) {
      next();
      n += '.';
      n += expect_name();
    }
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        const Token& at = next();
        ExprPtr f = make(Expr::Kind::filter, at);
        f->name = dotted_name();
        f->kids.push_back(std::move(e));
        if (is_op("(")) parse_args(*f);
        e = fin(std::move(f));
      } else if (is_name("is")) {
        const Token& at = next();
        ExprPtr t = make(Expr::Kind::test, at);
        if (is_name("not")) {
          next();
          t->negated = true;
        }
        t->name = dotted_name();
        t->kids.push_back(std::move(e));
        if (is_op("(")) {
          parse_args(*t);
        } else if ((cur().kind == Tok::name || cur().kind == Tok::string || cur().kind == Tok::integer ||
                    cur().kind == Tok::number || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          t->kids.push_back(parse_postfix(parse_primary()));
        }
        e = fin(std::move(t));
      } else if (is_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  std::size_t i_ = 0;
  const std::string& name_;
  const Limits& limits_;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

std::shared_ptr<const Program> parse_template(std::string_view source, const std::string& name,
                                              const Limits& limits) {
  ATTN_CHECK(static_cast<int64_t>(source.size()) <= limits.max_template_bytes, "template '", name,
             "': ", source.size(), " bytes; the limit is ", limits.max_template_bytes);
  auto p = std::make_shared<Program>();
  p->name = name;
  Parser parser(lex_template(source, name), name, limits);
  p->body = parser.parse_all();
  return p;
}

}  // namespace attn::text::jinja::detail
