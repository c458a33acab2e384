// attn classify [--model runs/classify/model.attn] TEXT... | --file F | -
// Label, probability and the characters [CLS] attended to most, per layer
// (head-averaged, and per head with --heads), from the exact weights the
// attention kernel computed. --json for machine-readable output.
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <attn/models/text_classifier.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "attribution_report.h"
#include "classify_internal.h"
#include "commands.h"

namespace attn::cli {

namespace classify {

namespace fs = std::filesystem;

namespace {

// The repository above the running binary (build/<preset>/attn): the first
// ancestor folder that holds scripts/fetch-reviews.sh; empty when none does.
fs::path repo_root() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (fs::path p = exe.parent_path(); !p.empty() && p != p.parent_path(); p = p.parent_path())
    if (fs::exists(p / "scripts" / "fetch-reviews.sh", ec)) return p;
  return {};
}

bool has_reviews(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "reviews-zh" / "pos.txt", ec) &&
         fs::is_regular_file(dir / "reviews-zh" / "neg.txt", ec);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string find_reviews_dir() {
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("ATTN_DATA_DIR"); env != nullptr && *env != '\0') {
    tried.emplace_back(env);
  } else {
    tried.emplace_back("../shared/data");
    const fs::path repo = repo_root();
    if (!repo.empty()) {
      tried.push_back(repo / ".." / "shared" / "data");
      tried.push_back(repo / "data");
    }
  }
  for (const auto& d : tried)
    if (has_reviews(d)) return d.lexically_normal().string();
  std::string where;
  for (const auto& d : tried) where += "\n  " + (d / "reviews-zh").lexically_normal().string();
  const char* env = std::getenv("ATTN_DATA_DIR");
  throw Error("no review data found: looked for pos.txt and neg.txt in" + where +
              (env != nullptr && *env != '\0' ? " (from ATTN_DATA_DIR)" : "") +
              "\nrun scripts/fetch-reviews.sh to download them (into <repo>/data), "
              "or give --pos FILE --neg FILE, or --data FILE");
}

std::vector<double> mean_over_heads(const models::Classification& c, int64_t layer) {
  ATTN_CHECK(layer >= 0 && layer < static_cast<int64_t>(c.attention.size()), "classify: layer ", layer,
             " out of range [0, ", c.attention.size(), ")");
  const auto& heads = c.attention[layer];
  std::vector<double> mean(c.tokens.size(), 0.0);
  for (const auto& h : heads)
    for (std::size_t k = 0; k < mean.size(); ++k) mean[k] += h[k] / static_cast<double>(heads.size());
  return mean;
}

std::vector<int64_t> top_attended(const models::Classification& c, int64_t layer, int64_t head, int64_t top) {
  const std::vector<double> w = head < 0 ? mean_over_heads(c, layer) : c.attention.at(layer).at(head);
  std::vector<int64_t> idx;
  for (int64_t k = 1; k < static_cast<int64_t>(w.size()); ++k) idx.push_back(k);  // skip [CLS]
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return w[a] > w[b]; });
  if (static_cast<int64_t>(idx.size()) > top) idx.resize(static_cast<std::size_t>(top));
  return idx;
}

namespace {

// "  好 0.210  质 0.120 ..."; a character that occurs more than once in the
// text is followed by its position ("好@7", [CLS] is position 0).
std::string attended_line(const models::Classification& c, const std::vector<double>& w,
                          const std::vector<int64_t>& idx) {
  std::string s;
  for (int64_t k : idx) {
    s += "  ";
    s += c.tokens[k];
    if (std::count(c.tokens.begin(), c.tokens.end(), c.tokens[k]) > 1) {
      s += '@';
      s += std::to_string(k);
    }
    s += " ";
    s += fixed(w[k], 3);
  }
  return s;
}

}  // namespace

std::string format_classification(const std::string& text, const models::Classification& c,
                                  const std::vector<std::string>& labels, const PrintOptions& options) {
  std::string s = "text   " + text + "\n";
  s += "label  " + labels.at(c.label) + "  (p = " + fixed(c.probs[c.label], 3);
  for (std::size_t k = 0; k < labels.size(); ++k)
    if (static_cast<int32_t>(k) != c.label) s += ", " + labels[k] + " " + fixed(c.probs[k], 3);
  s += ")\n";
  if (c.truncated)
    s += "note   the model read the first " + std::to_string(c.tokens.size() - 1) + " of " +
         std::to_string(c.text_tokens) + " characters\n";
  if (!c.attention.empty()) {
    s += "[CLS] attended most to (weight, " + std::to_string(c.tokens.size()) + " positions incl. [CLS]):\n";
    for (int64_t l = 0; l < static_cast<int64_t>(c.attention.size()); ++l) {
      const std::vector<double> mean = mean_over_heads(c, l);
      s += "  layer " + std::to_string(l + 1) + " (mean of " + std::to_string(c.attention[l].size()) +
           " heads, [CLS] " + fixed(mean[0], 3) +
           "):" + attended_line(c, mean, top_attended(c, l, -1, options.top)) + "\n";
      if (options.heads)
        for (int64_t h = 0; h < static_cast<int64_t>(c.attention[l].size()); ++h)
          s += "    head " + std::to_string(h + 1) + ":" +
               attended_line(c, c.attention[l][h], top_attended(c, l, h, options.top)) + "\n";
    }
  }
  return s;
}

json::Value classification_json(const std::string& text, const models::Classification& c,
                                const std::vector<std::string>& labels, const PrintOptions& options) {
  using json::Value;
  Value probs = Value::object();
  for (std::size_t k = 0; k < labels.size(); ++k) probs.set(labels[k], Value::number(c.probs[k]));
  Value tokens = Value::array();
  for (const auto& t : c.tokens) tokens.push_back(Value::string(t));
  Value unknown = Value::array();
  for (std::size_t k = 0; k < c.unknown.size(); ++k)
    if (c.unknown[k]) unknown.push_back(Value::integer(static_cast<int64_t>(k)));
  Value layers = Value::array();
  auto numbers = [](const std::vector<double>& v) {
    Value a = Value::array();
    for (double x : v) a.push_back(Value::number(x));
    return a;
  };
  for (int64_t l = 0; l < static_cast<int64_t>(c.attention.size()); ++l) {
    const std::vector<double> mean = mean_over_heads(c, l);
    Value top = Value::array();
    for (int64_t k : top_attended(c, l, -1, options.top))
      top.push_back(Value::object({{"index", Value::integer(k)},
                                   {"token", Value::string(c.tokens[k])},
                                   {"weight", Value::number(mean[k])}}));
    Value layer = Value::object({{"layer", Value::integer(l + 1)}, {"mean", numbers(mean)}, {"top", top}});
    if (options.heads) {
      Value heads = Value::array();
      for (const auto& h : c.attention[l]) heads.push_back(numbers(h));
      layer.set("heads", heads);
    }
    layers.push_back(layer);
  }
  return Value::object({{"text", Value::string(text)},
                        {"label", Value::string(labels.at(c.label))},
                        {"probability", Value::number(c.probs[c.label])},
                        {"probabilities", probs},
                        {"tokens", tokens},
                        {"unknown_tokens", unknown},
                        {"truncated", Value::boolean(c.truncated)},
                        {"text_tokens", Value::integer(c.text_tokens)},
                        {"attention", layers}});
}

}  // namespace classify

namespace {

const std::vector<OptionSpec>& classify_options() {
  static const std::vector<OptionSpec> specs = [] {
    std::vector<OptionSpec> v = {
        {"model", "FILE", "the trained model (default runs/classify/model.attn, from 'attn train classify')"},
        {"file", "FILE", "classify every non-blank line of FILE (UTF-8)"},
        {"top", "N", "characters listed per layer and head (default 5)"},
        {"heads", "", "also list the attention of every head"},
        {"json", "", "print JSON (one object with a \"results\" array)"},
        {"help", "", "this text"},
    };
    for (const auto& o : attrib::explain_options()) v.push_back(o);  // --explain and its options
    return v;
  }();
  return specs;
}

std::string read_all(std::istream& in) {
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Non-blank lines of a UTF-8 text (invalid UTF-8 is an error naming `what` and the line).
std::vector<std::string> lines_of(const std::string& bytes, const std::string& what) {
  std::vector<std::string> out;
  std::size_t start = 0;
  int64_t line = 0;
  while (start <= bytes.size()) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    std::string s = bytes.substr(start, end - start);
    ++line;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    const std::size_t bad = json::find_invalid_utf8(s);
    ATTN_CHECK(bad == std::string::npos, what, " line ", line, ": invalid UTF-8 at byte ", bad + 1,
               " of the line");
    if (s.find_first_not_of(" \t") != std::string::npos) out.push_back(s);
    start = end + 1;
  }
  return out;
}

}  // namespace

int run_classify(const std::vector<std::string>& raw) {
  // Positional arguments (texts, or "-" for stdin) are taken out before the strict parser.
  std::vector<std::string> args, texts;
  bool from_stdin = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "-") {
      from_stdin = true;
    } else if (a.rfind("--", 0) == 0) {
      args.push_back(a);
      if (a.find('=') == std::string::npos)
        for (const auto& o : classify_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) args.push_back(raw[++i]);
    } else {
      const std::size_t bad = json::find_invalid_utf8(a);
      ATTN_CHECK(bad == std::string::npos, "argument ", texts.size() + 1, ": invalid UTF-8 at byte ",
                 bad + 1);
      texts.push_back(a);
    }
  }
  const Args opts(args, classify_options());
  if (opts.has("help")) {
    std::printf(
        "usage: attn classify [--model FILE] [--heads] [--top N] [--json] TEXT... | --file FILE | -\n"
        "       attn classify --explain [--target LABEL] [--steps M] [--baseline pad|zeros] [--export F] "
        "TEXT\n\n"
        "Classifies each text with a model from 'attn train classify' and shows the label, its\n"
        "probability and the characters the [CLS] token attended to most in every layer (the\n"
        "attention weights the kernel computed, averaged over heads; --heads: per head).\n"
        "'-' reads one text per line from stdin.\n\n%s",
        format_options(classify_options()).c_str());
    return 0;
  }
  const int sources = !texts.empty() + opts.has("file") + from_stdin;
  ATTN_CHECK(sources == 1,
             "expected exactly one source of texts: TEXT arguments, --file FILE or '-' (stdin); got ",
             sources);
  if (opts.has("file")) {
    const std::string path = opts.str("file");
    std::ifstream f(path, std::ios::binary);
    ATTN_CHECK(f.good(), "cannot open '", path, "' for reading");
    texts = lines_of(read_all(f), path);
    ATTN_CHECK(!texts.empty(), path, ": no text to classify (the file is empty or blank)");
  } else if (from_stdin) {
    texts = lines_of(read_all(std::cin), "stdin");
    ATTN_CHECK(!texts.empty(), "stdin: no text to classify");
  }
  for (const auto& o : attrib::explain_options())
    ATTN_CHECK(o.name == "explain" || !opts.has(o.name) || opts.has("explain"), "--", o.name,
               " only applies with --explain");
  classify::PrintOptions po;
  if (opts.has("top")) po.top = opts.integer("top", 1, 1000);
  po.heads = opts.has("heads");
  const std::string model_path = opts.has("model") ? opts.str("model") : "runs/classify/model.attn";
  ATTN_CHECK(std::filesystem::exists(model_path), "model file '", model_path,
             "' not found; train one with 'attn train classify' or pass --model FILE");
  auto model = models::TextClassifier::load(model_path);
  const std::vector<models::Classification> results = model->classify(texts, true);
  if (opts.has("explain")) return attrib::run_classify_explain(*model, model_path, texts, results, opts);
  if (opts.has("json")) {
    json::Value arr = json::Value::array();
    for (std::size_t i = 0; i < texts.size(); ++i)
      arr.push_back(classify::classification_json(texts[i], results[i], model->labels(), po));
    json::Value doc = json::Value::object({{"model", json::Value::string(model_path)}, {"results", arr}});
    std::printf("%s\n", json::dump(doc, 2).c_str());
    return 0;
  }
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i > 0) std::printf("\n");
    std::fputs(classify::format_classification(texts[i], results[i], model->labels(), po).c_str(), stdout);
  }
  return 0;
}

}  // namespace attn::cli
