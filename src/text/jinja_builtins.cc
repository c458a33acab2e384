// The Jinja engine's built-ins (include/attn/text/jinja.h): member access, iteration and ordering as
// Jinja2 does them on Python values; the tests (`is defined`, ...), the string / dict / list methods
// that the sandbox allows, and the globals transformers provides (range, namespace, dict,
// raise_exception, strftime_now).
#include <algorithm>
#include <ctime>

#include "jinja_internal.h"

namespace attn::text::jinja::detail {

namespace {
[[noreturn]] void bad(const std::string& what) { throw Error(what); }

bool trusted_all(std::initializer_list<const Value*> vals) {
  for (const Value* v : vals)
    if (v && !all_trusted(*v)) return false;
  return true;
}
Value str_from(std::string text, std::initializer_list<const Value*> srcs) {
  return Value::from_str(make_str(std::move(text), trusted_all(srcs)));
}
const std::string& need_str(const Value* v, const char* what) {
  if (!v || !v->is_string())
    bad(std::string(what) + ": expected a string argument; got " + (v ? kind_name(v->kind()) : "nothing"));
  return v->str();
}
int64_t need_int(const Value* v, const char* what) {
  if (!v || (v->kind() != Value::Kind::integer && v->kind() != Value::Kind::boolean))
    bad(std::string(what) + ": expected an integer argument; got " + (v ? kind_name(v->kind()) : "nothing"));
  return v->kind() == Value::Kind::integer ? v->as_int() : v->as_bool();
}
}  // namespace

Value derived_str(std::string text, const Value& src) { return str_from(std::move(text), {&src}); }

Value make_seq(std::vector<Value> items, Seq seq) {
  Value v = Value::list(std::move(items));
  v.list_data()->seq = seq;
  return v;
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_dict()) {
    const Value* v = obj.find(name);
    return v ? *v : Value();
  }
  return Value();
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) return key.is_string() ? get_attr(obj, key.str()) : Value();
  if (key.kind() != Value::Kind::integer) return Value();
  int64_t i = key.as_int();
  if (obj.is_list()) {
    if (!subscriptable(obj)) return Value();  // generators and dict views are not subscriptable
    const int64_t n = static_cast<int64_t>(obj.items().size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? obj.items()[static_cast<std::size_t>(i)] : Value();
  }
  if (obj.is_string()) {
    const std::vector<std::size_t> starts = code_point_starts(obj.str());
    const int64_t n = static_cast<int64_t>(starts.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    const std::size_t b = starts[static_cast<std::size_t>(i)];
    const std::size_t e = i + 1 < n ? starts[static_cast<std::size_t>(i + 1)] : obj.str().size();
    return derived_str(obj.str().substr(b, e - b), obj);
  }
  return Value();
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
      return {};
    case Value::Kind::list:
      return v.items();
    case Value::Kind::dict: {
      if (v.dict_data()->is_namespace) bad("a namespace is not iterable");
      std::vector<Value> keys;
      for (const auto& e : v.entries()) keys.push_back(Value::input(e.first));
      return keys;
    }
    case Value::Kind::string: {
      std::vector<Value> out;
      const std::vector<std::size_t> starts = code_point_starts(v.str());
      for (std::size_t i = 0; i < starts.size(); ++i) {
        const std::size_t e = i + 1 < starts.size() ? starts[i + 1] : v.str().size();
        out.push_back(derived_str(v.str().substr(starts[i], e - starts[i]), v));
      }
      return out;
    }
    default:
      bad(std::string("a ") + kind_name(v.kind()) + " is not iterable");
  }
}

int compare_values(const Value& a, const Value& b) {
  const auto numeric = [](const Value& v) {
    return v.kind() == Value::Kind::integer || v.kind() == Value::Kind::number ||
           v.kind() == Value::Kind::boolean;
  };
  if (numeric(a) && numeric(b)) {
    if (a.kind() != Value::Kind::number && b.kind() != Value::Kind::number) {
      const int64_t x = a.kind() == Value::Kind::integer ? a.as_int() : a.as_bool();
      const int64_t y = b.kind() == Value::Kind::integer ? b.as_int() : b.as_bool();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const auto d = [](const Value& v) {
      return v.kind() == Value::Kind::number    ? v.as_double()
             : v.kind() == Value::Kind::integer ? static_cast<double>(v.as_int())
                                                : static_cast<double>(v.as_bool());
    };
    return d(a) < d(b) ? -1 : d(a) > d(b) ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.is_list() && b.is_list()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  bad(std::string("'<' is not supported between ") + kind_name(a.kind()) + " and " + kind_name(b.kind()));
}

// ---- tests

bool run_test(const std::string& name, const Value& v, const Args& a) {
  using K = Value::Kind;
  const K k = v.kind();
  if (name == "defined") return k != K::undefined;
  if (name == "undefined") return k == K::undefined;
  if (name == "none") return k == K::none;
  if (name == "boolean") return k == K::boolean;
  if (name == "true") return k == K::boolean && v.as_bool();
  if (name == "false") return k == K::boolean && !v.as_bool();
  if (name == "integer") return k == K::integer;
  if (name == "float") return k == K::number;
  if (name == "number") return k == K::integer || k == K::number || k == K::boolean;
  if (name == "string") return k == K::string;
  if (name == "mapping") return k == K::dict && !v.dict_data()->is_namespace;
  if (name == "iterable")
    return k == K::undefined || k == K::string || k == K::list ||
           (k == K::dict && !v.dict_data()->is_namespace);
  if (name == "sequence")
    return k == K::undefined || k == K::string || k == K::list ||
           (k == K::dict && !v.dict_data()->is_namespace);
  if (name == "callable") return k == K::function;
  if (name == "lower" || name == "upper") {  // str(value).islower() / isupper(): cased, all one case
    const std::string s = to_str(v)->text;
    const std::string low = py_lower(s), up = py_upper(s);
    return low != up && (name == "lower" ? low == s : up == s);
  }
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    const int64_t i = need_int(&v, name.c_str());
    return ((i % 2) != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = need_int(a.get(0, "num"), "divisibleby");
    if (d == 0) bad("divisibleby: division by zero");
    return need_int(&v, "divisibleby") % d == 0;
  }
  const Value* other = a.get(0, "other");
  static const char* compares[] = {"eq", "equalto",     "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=",
                                   "gt", "greaterthan", ">",  "ge", ">=", "in", "sameas"};
  if (std::find_if(std::begin(compares), std::end(compares), [&](const char* c) { return name == c; }) !=
      std::end(compares)) {
    if (!other) bad("test '" + name + "' needs an argument");
    if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, *other);
    if (name == "ne" || name == "!=") return !values_equal(v, *other);
    if (name == "sameas") {
      if (k != other->kind()) return false;
      if (k == K::list) return v.list_data() == other->list_data();
      if (k == K::dict) return v.dict_data() == other->dict_data();
      return values_equal(v, *other);
    }
    if (name == "in") {
      if (other->is_string()) return v.is_string() && other->str().find(v.str()) != std::string::npos;
      for (const Value& e : iterate(*other))
        if (values_equal(e, v)) return true;
      return false;
    }
    const int c = compare_values(v, *other);
    if (name == "lt" || name == "lessthan" || name == "<") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return c > 0;
    return c >= 0;
  }
  bad("unknown or unsupported test '" + name + "'");
}

// ---- methods

namespace {

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep && !sep->is_none()) {
    const std::string& d = need_str(sep, "split");
    if (d.empty()) bad("split: empty separator");
    std::size_t at = 0;
    while (maxsplit != 0) {
      const std::size_t f = s.find(d, at);
      if (f == std::string::npos) break;
      out.push_back(s.substr(at, f - at));
      at = f + d.size();
      --maxsplit;
    }
    out.push_back(s.substr(at));
    return out;
  }
  // Runs of whitespace; no empty strings.
  const std::vector<std::size_t> starts = code_point_starts(s);
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t e = i + 1 < starts.size() ? starts[i + 1] : s.size();
    const std::string cp = s.substr(starts[i], e - starts[i]);
    const bool sp = py_strip(cp, "", false, true, true).empty();
    if (sp && in_word && maxsplit != 0) {
      out.push_back(word);
      word.clear();
      in_word = false;
      --maxsplit;
      continue;
    }
    if (sp && !in_word) continue;
    if (!in_word && maxsplit == 0) {
      out.push_back(s.substr(starts[i]));
      return out;
    }
    in_word = true;
    word += cp;
  }
  if (in_word) out.push_back(word);
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between code points (and at both ends).
    std::string out;
    const std::vector<std::size_t> starts = code_point_starts(s);
    int64_t n = 0;
    for (std::size_t i = 0; i <= starts.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < starts.size()) {
        const std::size_t e = i + 1 < starts.size() ? starts[i + 1] : s.size();
        out.append(s, starts[i], e - starts[i]);
      }
    }
    return out;
  }
  std::string out;
  std::size_t at = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    const std::size_t f = s.find(from, at);
    if (f == std::string::npos) break;
    out.append(s, at, f - at);
    out += to;
    at = f + from.size();
    ++n;
  }
  out.append(s, at, std::string::npos);
  return out;
}

bool affix(const Value& obj, const Value* arg, bool start) {
  const auto one = [&](const std::string& p) {
    const std::string& s = obj.str();
    return p.size() <= s.size() &&
           (start ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (arg && arg->is_list()) {
    for (const Value& p : arg->items())
      if (one(need_str(&p, start ? "startswith" : "endswith"))) return true;
    return false;
  }
  return one(need_str(arg, start ? "startswith" : "endswith"));
}

std::string py_title(const std::string& s) {  // str.title: upper after a non-letter, else lower
  std::string out;
  bool prev_cased = false;
  const std::vector<std::size_t> starts = code_point_starts(s);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t e = i + 1 < starts.size() ? starts[i + 1] : s.size();
    const std::string cp = s.substr(starts[i], e - starts[i]);
    const std::string up = py_upper(cp), low = py_lower(cp);
    const bool cased = up != low;
    out += cased ? (prev_cased ? low : up) : cp;
    prev_cased = cased;
  }
  return out;
}

Value str_method(const Value& obj, const std::string& n, const Args& a, const Ctx& c) {
  const std::string& s = obj.str();
  if (n == "startswith") return Value::boolean(affix(obj, a.get(0, "prefix"), true));
  if (n == "endswith") return Value::boolean(affix(obj, a.get(0, "suffix"), false));
  if (n == "strip" || n == "lstrip" || n == "rstrip") {
    const Value* chars = a.get(0, "chars");
    const bool has = chars && !chars->is_none();
    return derived_str(
        py_strip(s, has ? need_str(chars, n.c_str()) : std::string(), has, n != "rstrip", n != "lstrip"),
        obj);
  }
  if (n == "split" || n == "rsplit") {
    const Value* ms = a.get(1, "maxsplit");
    const int64_t maxsplit = ms ? need_int(ms, "split") : -1;
    if (n == "rsplit" && maxsplit >= 0) bad("rsplit with maxsplit is not supported");
    std::vector<Value> out;
    for (std::string& part : py_split(s, a.get(0, "sep"), maxsplit))
      out.push_back(derived_str(std::move(part), obj));
    return Value::list(std::move(out));
  }
  if (n == "replace") {
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    const Value* cnt = a.get(2, "count");
    std::string r = py_replace(s, need_str(from, "replace"), need_str(to, "replace"),
                               cnt ? need_int(cnt, "replace") : -1);
    c.check_size(r.size());
    return str_from(std::move(r), {&obj, to});
  }
  if (n == "upper") return derived_str(py_upper(s), obj);
  if (n == "lower") return derived_str(py_lower(s), obj);
  if (n == "title") return derived_str(py_title(s), obj);
  if (n == "capitalize") {
    const std::vector<std::size_t> st = code_point_starts(s);
    if (st.empty()) return obj;
    const std::size_t e = st.size() > 1 ? st[1] : s.size();
    return derived_str(py_upper(s.substr(0, e)) + py_lower(s.substr(e)), obj);
  }
  if (n == "find" || n == "rfind" || n == "count" || n == "index") {
    const std::string& sub = need_str(a.get(0, "sub"), n.c_str());
    if (n == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(code_point_count(s)) + 1);
      int64_t k = 0;
      for (std::size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++k;
      return Value::integer(k);
    }
    const std::size_t f = n == "rfind" ? s.rfind(sub) : s.find(sub);
    if (f == std::string::npos) {
      if (n == "index") bad("index: substring not found");
      return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(code_point_count(s.substr(0, f))));
  }
  if (n == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) bad("join: expected an iterable argument");
    auto acc = make_str("", true);
    bool first = true;
    for (const Value& e : iterate(*it)) {
      if (!e.is_string()) bad(std::string("join: expected string items; got ") + kind_name(e.kind()));
      if (!first) acc = concat_str(*acc, *obj.str_data());
      acc = concat_str(*acc, *e.str_data());
      c.check_size(acc->text.size());
      first = false;
    }
    return Value::from_str(acc);
  }
  const auto all_cp = [&](auto pred) {
    if (s.empty()) return false;
    for (unsigned char ch : s)
      if (ch >= 0x80 || !pred(ch)) return false;
    return true;
  };
  if (n == "isdigit") return Value::boolean(all_cp([](unsigned char ch) { return std::isdigit(ch) != 0; }));
  if (n == "isalpha") return Value::boolean(all_cp([](unsigned char ch) { return std::isalpha(ch) != 0; }));
  if (n == "isalnum") return Value::boolean(all_cp([](unsigned char ch) { return std::isalnum(ch) != 0; }));
  if (n == "isspace") return Value::boolean(!s.empty() && py_strip(s, "", false, true, true).empty());
  if (n == "islower") return Value::boolean(py_lower(s) == s && py_upper(s) != s);
  if (n == "isupper") return Value::boolean(py_upper(s) == s && py_lower(s) != s);
  bad("string has no method '" + n + "'");
}

}  // namespace

bool is_method(const Value& obj, const std::string& n) {
  static const char* str_methods[] = {"startswith", "endswith", "strip",   "lstrip",  "rstrip", "split",
                                      "rsplit",     "replace",  "upper",   "lower",   "title",  "capitalize",
                                      "find",       "rfind",    "count",   "index",   "join",   "isdigit",
                                      "isalpha",    "isalnum",  "isspace", "islower", "isupper"};
  static const char* dict_methods[] = {"items", "keys", "values", "get"};
  static const char* list_methods[] = {"index", "count"};
  static const char* mutating[] = {"append",     "extend", "insert",  "pop",     "remove", "clear",  "update",
                                   "setdefault", "sort",   "reverse", "popitem", "add",    "discard"};
  const auto in = [&](auto& arr) {
    return std::find_if(std::begin(arr), std::end(arr), [&](const char* m) { return n == m; }) !=
           std::end(arr);
  };
  if (obj.is_string()) return in(str_methods);
  if (obj.is_dict() && !obj.dict_data()->is_namespace) {
    if (obj.find(n) && obj.find(n)->kind() == Value::Kind::function) return false;
    return in(dict_methods) || in(mutating);
  }
  if (obj.is_list()) return in(list_methods) || in(mutating);
  return false;
}

Value run_method(const Value& obj, const std::string& n, const Args& a, const Ctx& c) {
  if (obj.is_string()) return str_method(obj, n, a, c);
  if (obj.is_dict()) {
    if (n == "items") {
      std::vector<Value> out;
      for (const auto& [k, v] : obj.entries()) out.push_back(Value::tuple({Value::input(k), v}));
      return make_seq(std::move(out), Seq::dict_items);
    }
    if (n == "keys") {
      std::vector<Value> out;
      for (const auto& e : obj.entries()) out.push_back(Value::input(e.first));
      return make_seq(std::move(out), Seq::dict_keys);
    }
    if (n == "values") {
      std::vector<Value> out;
      for (const auto& e : obj.entries()) out.push_back(e.second);
      return make_seq(std::move(out), Seq::dict_values);
    }
    if (n == "get") {
      const Value* k = a.get(0, "key");
      const Value* def = a.get(1, "default");
      const Value* v = k && k->is_string() ? obj.find(k->str()) : nullptr;
      return v ? *v : def ? *def : Value::none();
    }
  }
  if (obj.is_list() && (n == "index" || n == "count")) {
    const Value* x = a.get(0, "value");
    if (!x) bad(n + ": expected an argument");
    int64_t k = 0;
    for (std::size_t i = 0; i < obj.items().size(); ++i) {
      if (!values_equal(obj.items()[i], *x)) continue;
      if (n == "index") return Value::integer(static_cast<int64_t>(i));
      ++k;
    }
    if (n == "index") bad("index: value is not in the list");
    return Value::integer(k);
  }
  bad("'" + n + "' would modify a " + kind_name(obj.kind()) +
      "; templates cannot modify values (transformers renders in an immutable sandbox)");
}

// ---- globals

bool is_global(const std::string& n) {
  return n == "range" || n == "namespace" || n == "dict" || n == "raise_exception" || n == "strftime_now";
}

Value run_global(const std::string& n, const Args& a, const Ctx& c) {
  if (n == "raise_exception") {
    const Value* m = a.get(0, "message");
    throw Error("raise_exception: " + (m ? to_str(*m)->text : std::string()));
  }
  if (n == "range") {
    if (a.pos.empty() || a.pos.size() > 3 || !a.kw.empty()) bad("range: expected 1 to 3 positional integers");
    int64_t start = 0, stop = 0, step = 1;
    if (a.pos.size() == 1) {
      stop = need_int(&a.pos[0], "range");
    } else {
      start = need_int(&a.pos[0], "range");
      stop = need_int(&a.pos[1], "range");
      if (a.pos.size() == 3) step = need_int(&a.pos[2], "range");
    }
    if (step == 0) bad("range: step must not be zero");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(Value::integer(i));
      if (out.size() % 4096 == 0) c.check_size(out.size());
    }
    return Value::list(std::move(out));
  }
  if (n == "namespace" || n == "dict") {
    Value d = Value::dict();
    d.dict_data()->is_namespace = n == "namespace";
    for (const Value& p : a.pos) {
      if (!p.is_dict()) bad(n + ": positional arguments must be dicts; got " + kind_name(p.kind()));
      for (const auto& [k, v] : p.entries()) d.set(k, v);
    }
    for (const auto& [k, v] : a.kw) d.set(k, v);
    if (n == "namespace")
      for (const auto& [k, v] : d.entries())
        if (!k.empty() && k[0] == '_')
          bad("namespace: attribute names may not start with '_'; got '" + k + "'");
    return d;
  }
  if (n == "strftime_now") {
    const std::string& fmt = need_str(a.get(0, "format"), "strftime_now");
    std::tm tm{};
    if (c.options->now) {
      tm = *c.options->now;
    } else {
      const std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    char buf[512];
    const std::size_t len = fmt.empty() ? 0 : std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    if (len == 0 && !fmt.empty()) bad("strftime_now: the format gives an empty or too long result: " + fmt);
    return Value::text(std::string(buf, len));
  }
  bad("unknown function '" + n + "'");
}

}  // namespace attn::text::jinja::detail
