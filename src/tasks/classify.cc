// attn::tasks classify_texts and the printing of one classified text
// (include/attn/tasks/classify.h).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace attn::tasks {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

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

// Text for a terminal: control characters (U+0000..U+001F, U+007F and the C1 controls
// U+0080..U+009F, which include the escape sequences' introducers) become '?', as in
// `attn view --terminal`, so a text or a model file cannot drive the terminal.
std::string printable(std::string_view t) {
  std::string out;
  out.reserve(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const auto b = static_cast<unsigned char>(t[i]);
    if (b < 0x20 || b == 0x7F) {
      out += '?';
    } else if (b == 0xC2 && i + 1 < t.size() && static_cast<unsigned char>(t[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(t[i + 1]) <= 0x9F) {
      out += '?';
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

// "  好 0.210  质 0.120 ..."; a character that occurs more than once in the
// text is followed by its position ("好@7", [CLS] is position 0).
std::string attended_line(const models::Classification& c, const std::vector<double>& w,
                          const std::vector<int64_t>& idx) {
  std::string s;
  for (int64_t k : idx) {
    s += "  ";
    s += printable(c.tokens[k]);
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
                                  const std::vector<std::string>& labels, const ClassifyFormat& options) {
  const bool zh = options.chinese;
  std::string s = (zh ? "文本   " : "text   ") + printable(text) + "\n";
  s += (zh ? "类别   " : "label  ") + printable(labels.at(c.label)) + "  (p = " + fixed(c.probs[c.label], 3);
  for (std::size_t k = 0; k < labels.size(); ++k)
    if (static_cast<int32_t>(k) != c.label) s += ", " + printable(labels[k]) + " " + fixed(c.probs[k], 3);
  s += ")\n";
  if (c.truncated)
    s += zh ? "注意   模型只读了 " + std::to_string(c.text_tokens) + " 个字符中的前 " +
                  std::to_string(c.tokens.size() - 1) + " 个\n"
            : "note   the model read the first " + std::to_string(c.tokens.size() - 1) + " of " +
                  std::to_string(c.text_tokens) + " characters\n";
  if (!c.attention.empty()) {
    s += zh ? "[CLS] 关注最多的位置（权重；共 " + std::to_string(c.tokens.size()) + " 个位置，含 [CLS]）：\n"
            : "[CLS] attended most to (weight, " + std::to_string(c.tokens.size()) +
                  " positions incl. [CLS]):\n";
    for (int64_t l = 0; l < static_cast<int64_t>(c.attention.size()); ++l) {
      const std::vector<double> mean = mean_over_heads(c, l);
      const std::string heads = std::to_string(c.attention[l].size());
      s += zh ? "  第 " + std::to_string(l) + " 层（" + heads + " 个头的平均，[CLS] " + fixed(mean[0], 3) +
                    "）："
              : "  layer " + std::to_string(l) + " (mean of " + heads + " heads, [CLS] " + fixed(mean[0], 3) +
                    "):";
      s += attended_line(c, mean, top_attended(c, l, -1, options.top)) + "\n";
      if (options.heads)
        for (int64_t h = 0; h < static_cast<int64_t>(c.attention[l].size()); ++h)
          s += (zh ? "    头 " : "    head ") + std::to_string(h) + ":" +
               attended_line(c, c.attention[l][h], top_attended(c, l, h, options.top)) + "\n";
    }
  }
  return s;
}

json::Value classification_json(const std::string& text, const models::Classification& c,
                                const std::vector<std::string>& labels, const ClassifyFormat& options) {
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
    Value layer = Value::object({{"layer", Value::integer(l)}, {"mean", numbers(mean)}, {"top", top}});
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

// Non-blank lines of a UTF-8 text (invalid UTF-8 is an error naming `what` and the line).
std::vector<std::string> nonblank_lines(const std::string& bytes, const std::string& what) {
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

ClassifyResult classify_texts(const ClassifyOptions& options) {
  ATTN_CHECK(std::filesystem::exists(options.model), "model file '", options.model,
             "' not found; train one with 'attn train classify' or pass --model FILE");
  ATTN_CHECK(!options.texts.empty(), "classify: no text to classify");
  ClassifyResult r;
  r.model = models::TextClassifier::load(options.model);
  r.classifications = r.model->classify(options.texts, true);
  json::Value arr = json::Value::array();
  for (std::size_t i = 0; i < options.texts.size(); ++i) {
    if (i > 0) r.text += "\n";
    r.text +=
        format_classification(options.texts[i], r.classifications[i], r.model->labels(), options.format);
    arr.push_back(
        classification_json(options.texts[i], r.classifications[i], r.model->labels(), options.format));
  }
  r.json = json::Value::object({{"model", json::Value::string(options.model)}, {"results", arr}});
  return r;
}

}  // namespace attn::tasks
