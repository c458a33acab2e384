// The Jinja engine's filters (include/attn/text/jinja.h): the Jinja2 built-in filters that chat
// templates use, with transformers' own tojson. Strings computed from the caller's input stay input.
#include <algorithm>
#include <cmath>
#include <optional>

#include "jinja_internal.h"

namespace attn::text::jinja::detail {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(what); }

int64_t int_arg(const Args& a, std::size_t i, const char* name, int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (v->kind() != Value::Kind::integer && v->kind() != Value::Kind::boolean)
    bad(std::string("argument '") + name + "' must be an integer; got " + kind_name(v->kind()));
  return v->kind() == Value::Kind::integer ? v->as_int() : v->as_bool();
}
bool bool_arg(const Args& a, std::size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : def;
}

// attribute="a.b" or an integer index, as Jinja2's make_attrgetter.
Value attr_path(const Value& v, const Value& attr) {
  if (attr.kind() == Value::Kind::integer) return get_item(v, attr);
  if (!attr.is_string()) bad("attribute must be a string or an integer");
  Value cur = v;
  std::size_t at = 0;
  const std::string& path = attr.str();
  while (true) {
    const std::size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (cur.is_undefined()) return cur;
    bool digits = !part.empty() &&
                  std::all_of(part.begin(), part.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    cur = digits ? get_item(cur, Value::integer(std::stoll(part))) : get_attr(cur, part);
    if (dot == std::string::npos) return cur;
    at = dot + 1;
  }
}

Value join_filter(const Value& v, const Args& a, const Ctx& c) {
  const Value* sep = a.get(0, "d");
  const Value* attr = a.get(1, "attribute");
  auto acc = make_str("", true);
  const auto sep_str = sep ? to_str(*sep) : make_str("", true);
  bool first = true;
  for (const Value& e : iterate(v)) {
    if (!first) acc = concat_str(*acc, *sep_str);
    acc = concat_str(*acc, *to_str(attr ? attr_path(e, *attr) : e));
    c.check_size(acc->text.size());
    first = false;
  }
  return Value::from_str(acc);
}

Value tojson_filter(const Value& v, const Args& a, const Ctx& c) {
  const Value* ind = a.get(0, "indent");
  int indent = -1;
  if (ind && !ind->is_none()) {
    if (ind->kind() != Value::Kind::integer) bad("tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), 0, 64));
  }
  for (const auto& [k, val] : a.kw) {
    if (k == "indent" || k == "sort_keys") continue;
    if (k == "ensure_ascii" && !truthy(val)) continue;
    bad("tojson: unsupported argument '" + k + "'");
  }
  const Value* sk = nullptr;
  for (const auto& [k, val] : a.kw)
    if (k == "sort_keys") sk = &val;
  std::string out;
  to_json(out, v, indent, sk && truthy(*sk), 0);
  c.check_size(out.size());
  return derived_str(std::move(out), v);
}

// select / reject / selectattr / rejectattr.
Value select_filter(const std::string& name, const Value& v, const Args& a) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep = name == "select" || name == "selectattr";
  std::size_t at = 0;
  const Value* attr = nullptr;
  if (by_attr) {
    if (a.pos.empty()) bad(name + ": expected an attribute name");
    attr = &a.pos[at++];
  }
  std::string test;
  Args targs;
  if (at < a.pos.size()) {
    if (!a.pos[at].is_string()) bad(name + ": the test name must be a string");
    test = a.pos[at++].str();
    targs.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(at), a.pos.end());
  }
  std::vector<Value> out;
  for (const Value& e : iterate(v)) {
    const Value x = attr ? attr_path(e, *attr) : e;
    const bool pass = test.empty() ? truthy(x) : run_test(test, x, targs);
    if (pass == keep) out.push_back(e);
  }
  return make_seq(std::move(out), Seq::generator);
}

Value map_filter(const Value& v, const Args& a, const Ctx& c) {
  std::vector<Value> out;
  const Value* attr = nullptr;
  const Value* def = nullptr;
  for (const auto& [k, val] : a.kw) {
    if (k == "attribute")
      attr = &val;
    else if (k == "default")
      def = &val;
    else
      bad("map: unsupported argument '" + k + "'");
  }
  if (attr) {
    for (const Value& e : iterate(v)) {
      Value x = attr_path(e, *attr);
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return make_seq(std::move(out), Seq::generator);
  }
  if (a.pos.empty() || !a.pos[0].is_string()) bad("map: expected a filter name or attribute=");
  Args rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  for (const Value& e : iterate(v)) out.push_back(run_filter(a.pos[0].str(), e, rest, c));
  return make_seq(std::move(out), Seq::generator);
}

std::vector<Value> sorted(std::vector<Value> items, const Args& a, std::size_t first, const char* name) {
  const bool reverse = bool_arg(a, first, "reverse", false);
  const bool case_sensitive = bool_arg(a, first + 1, "case_sensitive", false);
  const Value* attr = a.get(first + 2, "attribute");
  const auto key = [&](const Value& e) {
    Value k = attr ? attr_path(e, *attr) : e;
    if (!case_sensitive && k.is_string()) k = derived_str(py_lower(k.str()), k);
    return k;
  };
  (void)name;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return compare_values(key(x), key(y)) * (reverse ? -1 : 1) < 0;
  });
  return items;
}

std::string title_words(const std::string& s) {  // Jinja2's title: words start after - whitespace ( { [ <
  std::string out;
  bool start = true;
  const std::vector<std::size_t> st = code_point_starts(s);
  for (std::size_t i = 0; i < st.size(); ++i) {
    const std::size_t e = i + 1 < st.size() ? st[i + 1] : s.size();
    const std::string cp = s.substr(st[i], e - st[i]);
    const bool sep = cp == "-" || cp == "(" || cp == "{" || cp == "[" || cp == "<" ||
                     py_strip(cp, "", false, true, true).empty();
    out += sep ? cp : start ? py_upper(cp) : py_lower(cp);
    start = sep;
  }
  return out;
}

// Each group returns nullopt for a name it does not have.
std::optional<Value> text_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c) {
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    const auto s = to_str(v);
    const bool has = chars && !chars->is_none();
    if (has && !chars->is_string()) bad("trim: chars must be a string");
    return derived_str(py_strip(s->text, has ? chars->str() : std::string(), has, true, true), v);
  }
  if (name == "length" || name == "count") {
    if (v.is_undefined()) return Value::integer(0);
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(v.str())));
    if (seq_of(v) == Seq::generator)
      bad("length: a generator (the result of map / select / ...) has no length; apply |list first");
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.items().size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.entries().size()));
    bad(std::string("length: a ") + kind_name(v.kind()) + " has no length");
  }
  if (name == "tojson") return tojson_filter(v, a, c);
  if (name == "string") return Value::from_str(to_str(v));
  if (name == "safe") return v;
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    const auto s = to_str(v);
    std::string r;
    if (name == "upper")
      r = py_upper(s->text);
    else if (name == "lower")
      r = py_lower(s->text);
    else if (name == "title")
      r = title_words(s->text);
    else {
      const std::vector<std::size_t> st = code_point_starts(s->text);
      const std::size_t e = st.size() > 1 ? st[1] : s->text.size();
      r = py_upper(s->text.substr(0, e)) + py_lower(s->text.substr(e));
    }
    return derived_str(std::move(r), v);
  }
  return std::nullopt;
}

std::optional<Value> sequence_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c) {
  if (name == "join") return join_filter(v, a, c);
  if (name == "items") {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) bad(std::string("items: expected a dict; got ") + kind_name(v.kind()));
    return make_seq(run_method(v, "items", Args{}, c).items(), Seq::generator);
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(v);
    if (name == "last" && seq_of(v) == Seq::generator)
      bad("last: a generator cannot be reversed; apply |list first");
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    if (v.is_string()) {
      std::string s;
      for (const Value& e : items) s += e.str();
      return derived_str(std::move(s), v);
    }
    return make_seq(std::move(items), Seq::generator);  // Jinja2 gives a reverse iterator
  }
  if (name == "unique") {
    std::vector<Value> out;
    for (const Value& e : iterate(v)) {
      const auto same = [&](const Value& o) {
        return e.is_string() && o.is_string() ? py_lower(e.str()) == py_lower(o.str()) : values_equal(e, o);
      };
      if (std::none_of(out.begin(), out.end(), same)) out.push_back(e);
    }
    return make_seq(std::move(out), Seq::generator);
  }
  if (name == "sort") return Value::list(sorted(iterate(v), a, 0, "sort"));
  if (name == "dictsort") {
    if (!v.is_dict()) bad("dictsort: expected a dict");
    std::vector<Value> pairs = run_method(v, "items", Args{}, c).items();
    const bool cs = bool_arg(a, 0, "case_sensitive", false);
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
      std::string kx = x.items()[0].str(), ky = y.items()[0].str();
      if (!cs) {
        kx = py_lower(kx);
        ky = py_lower(ky);
      }
      return kx < ky;
    });
    return Value::list(std::move(pairs));
  }
  if (name == "min" || name == "max") {
    std::vector<Value> items = sorted(iterate(v), a, 99, name.c_str());
    if (items.empty()) return Value();
    return name == "min" ? items.front() : items.back();
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr")
    return select_filter(name, v, a);
  if (name == "map") return map_filter(v, a, c);
  return std::nullopt;
}

std::optional<Value> number_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c) {
  using K = Value::Kind;
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    const Value* start = a.get(1, "start");
    bool is_float = start && start->kind() == K::number;
    double fsum = start ? (start->kind() == K::number ? start->as_double()
                                                      : static_cast<double>(int_arg(a, 1, "start", 0)))
                        : 0;
    int64_t isum = start && !is_float ? int_arg(a, 1, "start", 0) : 0;
    for (const Value& e : iterate(v)) {
      const Value x = attr && !attr->is_none() ? attr_path(e, *attr) : e;
      if (x.kind() == K::number) {
        if (!is_float) fsum = static_cast<double>(isum);
        is_float = true;
        fsum += x.as_double();
      } else if (x.kind() == K::integer || x.kind() == K::boolean) {
        const int64_t i = x.kind() == K::integer ? x.as_int() : x.as_bool();
        if (is_float)
          fsum += static_cast<double>(i);
        else if (__builtin_add_overflow(isum, i, &isum))
          bad("sum: integer overflow");
      } else {
        bad(std::string("sum: expected numbers; got ") + kind_name(x.kind()));
      }
    }
    return is_float ? Value::number(fsum) : Value::integer(isum);
  }
  if (name == "replace") {
    Args m;
    m.pos = a.pos;
    return run_method(Value::from_str(to_str(v)), "replace", m, c);
  }
  if (name == "int") {
    if (v.kind() == K::integer) return v;
    if (v.kind() == K::boolean) return Value::integer(v.as_bool());
    if (v.kind() == K::number && std::isfinite(v.as_double()))
      return Value::integer(static_cast<int64_t>(v.as_double()));
    if (v.is_string()) {
      try {
        std::size_t used = 0;
        const std::string t = py_strip(v.str(), "", false, true, true);
        const int64_t r = std::stoll(t, &used, 10);
        if (used == t.size()) return Value::integer(r);
      } catch (const std::exception&) {
      }
      try {  // Jinja2 then tries int(float(value))
        std::size_t used = 0;
        const std::string t = py_strip(v.str(), "", false, true, true);
        const double r = std::stod(t, &used);
        if (used == t.size() && std::isfinite(r) && std::fabs(r) < 9.2e18)
          return Value::integer(static_cast<int64_t>(r));
      } catch (const std::exception&) {
      }
    }
    return Value::integer(int_arg(a, 0, "default", 0));
  }
  if (name == "float") {
    if (v.kind() == K::number) return v;
    if (v.kind() == K::integer) return Value::number(static_cast<double>(v.as_int()));
    if (v.kind() == K::boolean) return Value::number(v.as_bool() ? 1.0 : 0.0);
    if (v.is_string()) {
      try {
        std::size_t used = 0;
        const std::string t = py_strip(v.str(), "", false, true, true);
        const double r = std::stod(t, &used);
        if (used == t.size()) return Value::number(r);
      } catch (const std::exception&) {
      }
    }
    const Value* d = a.get(0, "default");
    return d ? *d : Value::number(0.0);
  }
  if (name == "abs") {
    if (v.kind() == K::boolean) return Value::integer(v.as_bool());
    if (v.kind() == K::integer) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.kind() == K::number) return Value::number(std::fabs(v.as_double()));
    bad(std::string("abs: expected a number; got ") + kind_name(v.kind()));
  }
  return std::nullopt;
}

std::optional<Value> format_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c) {
  if (name == "indent") {
    const Value* w = a.get(0, "width");
    const std::string pad =
        w && w->is_string()
            ? w->str()
            : std::string(static_cast<std::size_t>(std::clamp<int64_t>(int_arg(a, 0, "width", 4), 0, 256)),
                          ' ');
    const bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
    if (!v.is_string()) bad(std::string("indent: expected a string; got ") + kind_name(v.kind()));
    const auto s = to_str(v);
    std::string out;
    std::size_t at = 0;
    bool line0 = true;
    while (at <= s->text.size()) {
      const std::size_t nl = s->text.find('\n', at);
      const std::string line = s->text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      if (!line0) out += '\n';
      if ((!line0 || first) && (blank || !line.empty())) out += pad;
      out += line;
      line0 = false;
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    c.check_size(out.size());
    return derived_str(std::move(out), v);
  }
  if (name == "escape" || name == "e") {
    const auto s = to_str(v);
    std::string out;
    for (char ch : s->text) {
      switch (ch) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&#34;";
          break;
        case '\'':
          out += "&#39;";
          break;
        default:
          out += ch;
      }
    }
    return derived_str(std::move(out), v);
  }
  return std::nullopt;
}

}  // namespace

Value run_filter(const std::string& name, const Value& v, const Args& a, const Ctx& c) {
  for (auto* group : {text_filter, sequence_filter, number_filter, format_filter})
    if (std::optional<Value> r = group(name, v, a, c)) return *r;
  bad("unknown or unsupported filter '" + name + "'");
}

}  // namespace attn::text::jinja::detail
