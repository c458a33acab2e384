// `attn explain --attends`: what a pronoun attends to in a pretrained encoder
// (include/attn/teach/coref.h).
#include <attn/core/error.h>
#include <attn/models/bert.h>
#include <attn/tasks/embed.h>
#include <attn/teach/coref.h>
#include <attn/text/table.h>
#include <attn/viz/export.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace attn::teach {
namespace {

std::string fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

bool is_special(const std::string& piece) {
  return piece.size() >= 3 && piece.front() == '<' && piece.back() == '>';
}

// A piece as text: the word-start mark ▁ (U+2581) removed, specials empty.
std::string piece_text(const std::string& piece) {
  if (is_special(piece) || piece == "[CLS]" || piece == "[SEP]") return "";
  std::string s = piece;
  const std::string mark = "\xE2\x96\x81";
  for (std::size_t at; (at = s.find(mark)) != std::string::npos;) s.erase(at, mark.size());
  if (s.rfind("##", 0) == 0) s.erase(0, 2);  // WordPiece continuations
  return s;
}

std::string joined(const std::vector<std::string>& tokens) {
  std::string s;
  for (const auto& t : tokens) s += (s.empty() ? "" : " ") + t;
  return s;
}

// The pieces of `tokens` that overlap the first occurrence of `word` in their
// concatenated text (the sentence as the model normalised it).
std::vector<int64_t> pieces_of(const std::vector<std::string>& tokens, const std::string& word,
                               const std::string& what, const std::string& sentence) {
  std::string text;
  std::vector<std::size_t> start;
  for (const auto& t : tokens) {
    start.push_back(text.size());
    text += piece_text(t);
  }
  const std::size_t at = word.empty() ? std::string::npos : text.find(word);
  ATTN_CHECK(at != std::string::npos, "--attends: expected the ", what, " '", word, "' in the sentence '",
             sentence, "'; the model reads it as the pieces ", joined(tokens));
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::size_t b = start[i], e = b + piece_text(tokens[i]).size();
    if (e > b && b < at + word.size() && e > at) out.push_back(static_cast<int64_t>(i));
  }
  return out;
}

AttendsRun run_sentence(const models::SentenceEncoder& enc, const std::string& sentence,
                        const std::string& query, const std::string& antecedent) {
  AttendsRun r;
  r.sentence = sentence;
  const std::vector<int32_t> ids = enc.encode(sentence);
  for (const int32_t id : ids) r.tokens.push_back(enc.tokenizer().id_to_token(id));
  const std::vector<int64_t> q = pieces_of(r.tokens, query, "query", sentence);
  r.query = q.front();
  r.query_shared = q.size() > 1 || piece_text(r.tokens[static_cast<std::size_t>(r.query)]) != query;
  r.antecedent = pieces_of(r.tokens, antecedent, "antecedent", sentence);

  models::BertInput in;
  in.ids = {ids};
  models::BertRunOptions ro;
  ro.capture_attention = true;  // the fused kernel's exact probabilities
  const models::BertOutput out = enc.model().forward(in, ro);
  const auto n = static_cast<int64_t>(ids.size());
  r.layers = static_cast<int64_t>(out.attention.size());
  for (const Tensor& t : out.attention) {
    const viz::Layer layer = viz::layer_from_weights(t);
    r.heads = layer.heads;
    for (int64_t h = 0; h < layer.heads; ++h)
      for (int64_t j = 0; j < n; ++j) r.weights.push_back(layer.at(h, r.query, j));
  }
  return r;
}

// The `top` strongest keys of the mean over heads of layer l.
std::vector<int64_t> top_of_mean(const AttendsRun& r, int64_t l, int64_t top) {
  const auto n = static_cast<int64_t>(r.tokens.size());
  std::vector<double> mean(static_cast<std::size_t>(n), 0.0);
  for (int64_t h = 0; h < r.heads; ++h)
    for (int64_t j = 0; j < n; ++j)
      mean[static_cast<std::size_t>(j)] += r.at(l, h, j) / static_cast<double>(r.heads);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    return mean[static_cast<std::size_t>(a)] > mean[static_cast<std::size_t>(b)];
  });
  idx.resize(static_cast<std::size_t>(std::min(top, n)));
  return idx;
}

int64_t strongest_key(const AttendsRun& r, int64_t l, int64_t h) {
  int64_t best = 0;
  for (int64_t j = 1; j < static_cast<int64_t>(r.tokens.size()); ++j)
    if (r.at(l, h, j) > r.at(l, h, best)) best = j;
  return best;
}

bool in_antecedent(const AttendsRun& r, int64_t j) {
  return std::find(r.antecedent.begin(), r.antecedent.end(), j) != r.antecedent.end();
}

std::string positions(const std::vector<int64_t>& p) {
  std::string s;
  for (const int64_t i : p) s += (s.empty() ? "" : ", ") + std::to_string(i);
  return s;
}

std::string pieces(const AttendsRun& r, const std::vector<int64_t>& p) {
  std::vector<std::string> t;
  for (const int64_t i : p) t.push_back(r.tokens[static_cast<std::size_t>(i)]);
  return joined(t);
}

// How a sentence was read: its pieces, the query's piece and the antecedent's.
std::string describe_run(const AttendsRun& r, const std::string& query, const std::string& antecedent,
                         Lang lang) {
  std::string s;
  s += tr(lang, "Sentence:   ", "句子：     ") + r.sentence + "\n";
  s += tr(lang, "Pieces:     ", "词元：     ") + joined(r.tokens) + tr(lang, "   (", "   （") +
       std::to_string(r.tokens.size()) +
       tr(lang, " tokens, as the model's tokenizer splits the text)", " 个，由模型自己的分词器切分）") + "\n";
  const std::string& qp = r.tokens[static_cast<std::size_t>(r.query)];
  s += tr(lang, "Query:      ", "查询：     ") + query + " -> " + qp + tr(lang, " (position ", "（位置 ") +
       std::to_string(r.query) + tr(lang, ")", "）") + "\n";
  if (r.query_shared)
    s += tr(lang,
            "            the tokenizer keeps " + query + " inside the piece " + qp +
                ", so the rows below are that piece's:\n"
                "            what it attends to mixes " +
                query + " with the rest of the piece.",
            "            分词器把 " + query + " 和别的字合成了一个词元 " + qp + "，下面的权重是这个词元的，" +
                "不只属于 " + query + "。") +
         "\n";
  s += tr(lang, "Antecedent: ", "先行词：   ") + antecedent + " -> " + pieces(r, r.antecedent) +
       tr(lang, " (positions ", "（位置 ") + positions(r.antecedent) +
       tr(lang, "; its weight is the sum over them)", "；它的权重是这些位置之和）") + "\n";
  return s;
}

json::Value run_json(const AttendsRun& r, const std::string& query, const std::string& antecedent,
                     int64_t top) {
  using json::Value;
  Value j = Value::object();
  j.set("sentence", Value::string(r.sentence));
  Value toks = Value::array();
  for (const auto& t : r.tokens) toks.push_back(Value::string(t));
  j.set("tokens", std::move(toks));
  Value q = Value::object();
  q.set("text", Value::string(query));
  q.set("position", Value::integer(r.query));
  q.set("piece", Value::string(r.tokens[static_cast<std::size_t>(r.query)]));
  q.set("shares_piece", Value::boolean(r.query_shared));
  j.set("query", std::move(q));
  Value a = Value::object();
  a.set("text", Value::string(antecedent));
  Value ap = Value::array();
  for (const int64_t p : r.antecedent) ap.push_back(Value::integer(p));
  a.set("positions", std::move(ap));
  j.set("antecedent", std::move(a));
  const auto n = static_cast<int64_t>(r.tokens.size());
  Value layers = Value::array();
  for (int64_t l = 0; l < r.layers; ++l) {
    Value lj = Value::object();
    lj.set("layer", Value::integer(l));
    Value mean = Value::array();
    for (int64_t k = 0; k < n; ++k) {
      double m = 0;
      for (int64_t h = 0; h < r.heads; ++h) m += r.at(l, h, k);
      mean.push_back(Value::number(m / static_cast<double>(r.heads)));
    }
    lj.set("mean_over_heads", std::move(mean));
    lj.set("antecedent_mean", Value::number(r.antecedent_mean(l)));
    Value tops = Value::array();
    for (const int64_t t : top_of_mean(r, l, top)) tops.push_back(Value::integer(t));
    lj.set("top_of_mean", std::move(tops));
    Value heads = Value::array();
    for (int64_t h = 0; h < r.heads; ++h) {
      Value hj = Value::object();
      hj.set("head", Value::integer(h));
      Value w = Value::array();
      for (int64_t k = 0; k < n; ++k) w.push_back(Value::number(r.at(l, h, k)));
      hj.set("weights", std::move(w));
      hj.set("antecedent", Value::number(r.antecedent_weight(l, h)));
      hj.set("strongest_key", Value::integer(strongest_key(r, l, h)));
      heads.push_back(std::move(hj));
    }
    lj.set("heads", std::move(heads));
    layers.push_back(std::move(lj));
  }
  j.set("layers", std::move(layers));
  return j;
}

// Per layer: the mean over heads on the antecedent, the top tokens, the heads
// whose strongest key is the antecedent, and the control's numbers.
std::string layer_table(const AttendsResult& res, const AttendsOptions& o) {
  const Lang lang = o.lang;
  const AttendsRun& r = res.main;
  std::vector<text::Table::Column> cols = {
      {tr(lang, "layer", "层"), text::Align::right},
      {tr(lang, "on ", "给 ") + o.antecedent, text::Align::right},
      {tr(lang, "heads top=", "最强为 ") + o.antecedent + tr(lang, "", " 的头"), text::Align::right},
      {tr(lang, "top tokens (mean over heads)", "权重最高的词元（各头平均）"), text::Align::left}};
  if (res.has_control) {
    cols.push_back({tr(lang, "control: on ", "对照：给 ") + o.control_antecedent, text::Align::right});
    cols.push_back({tr(lang, "difference", "差"), text::Align::right});
  }
  text::Table t(cols);
  for (int64_t l = 0; l < r.layers; ++l) {
    int64_t heads_on = 0;
    for (int64_t h = 0; h < r.heads; ++h) heads_on += in_antecedent(r, strongest_key(r, l, h));
    std::string tops;
    const auto n = static_cast<int64_t>(r.tokens.size());
    std::vector<double> mean(static_cast<std::size_t>(n), 0.0);
    for (int64_t h = 0; h < r.heads; ++h)
      for (int64_t k = 0; k < n; ++k)
        mean[static_cast<std::size_t>(k)] += r.at(l, h, k) / static_cast<double>(r.heads);
    for (const int64_t k : top_of_mean(r, l, o.top)) {
      if (!tops.empty()) tops += "  ";
      tops += r.tokens[static_cast<std::size_t>(k)];
      if (in_antecedent(r, k)) tops += '*';
      tops += ' ';
      tops += fixed(mean[static_cast<std::size_t>(k)]);
    }
    std::vector<std::string> row = {std::to_string(l), fixed(r.antecedent_mean(l)),
                                    std::to_string(heads_on) + "/" + std::to_string(r.heads), tops};
    if (res.has_control) {
      const double c = res.control.antecedent_mean(l);
      row.push_back(fixed(c));
      const double d = r.antecedent_mean(l) - c;
      std::string diff = d >= 0 ? "+" : "";
      diff += fixed(d);
      row.push_back(diff);
    }
    t.row(row);
  }
  return t.render();
}

std::string head_label(int64_t h) {
  std::string s = "h";
  s += std::to_string(h);
  return s;
}

// Per layer and head: the weight on the antecedent, "*" where it is the head's strongest key.
std::string head_grid(const AttendsRun& r, Lang lang) {
  std::vector<text::Table::Column> cols = {{tr(lang, "layer", "层"), text::Align::right}};
  for (int64_t h = 0; h < r.heads; ++h) cols.push_back({head_label(h), text::Align::right});
  text::Table t(cols);
  for (int64_t l = 0; l < r.layers; ++l) {
    std::vector<std::string> row = {std::to_string(l)};
    for (int64_t h = 0; h < r.heads; ++h)
      row.push_back(fixed(r.antecedent_weight(l, h), 2) +
                    (in_antecedent(r, strongest_key(r, l, h)) ? "*" : " "));
    t.row(row);
  }
  return t.render();
}

// Per layer and head: the strongest key and its weight.
std::string strongest_grid(const AttendsRun& r, Lang lang) {
  std::vector<text::Table::Column> cols = {{tr(lang, "layer", "层"), text::Align::right}};
  for (int64_t h = 0; h < r.heads; ++h) cols.push_back({head_label(h), text::Align::left});
  text::Table t(cols);
  for (int64_t l = 0; l < r.layers; ++l) {
    std::vector<std::string> row = {std::to_string(l)};
    for (int64_t h = 0; h < r.heads; ++h) {
      const int64_t k = strongest_key(r, l, h);
      row.push_back(r.tokens[static_cast<std::size_t>(k)] + " " +
                    std::to_string(static_cast<int>(r.at(l, h, k) * 100 + 0.5)));
    }
    t.row(row);
  }
  return t.render();
}

// The antecedent's share if every token got the same weight.
double even(const AttendsRun& r) {
  return static_cast<double>(r.antecedent.size()) / static_cast<double>(r.tokens.size());
}

std::string caveats(const AttendsResult& res, const AttendsOptions& o) {
  const Lang lang = o.lang;
  std::string s = tr(lang, "What this shows and what it does not\n------------------------------------\n",
                     "这说明了什么，没说明什么\n------------------------\n");
  s += tr(
      lang,
      "- These are the attention weights of one forward pass, captured from the engine's fused kernel: how\n"
      "  much of each token's value vector the query's position mixes in, in each head.\n"
      "- Attention is not a cause. A large weight on " +
          o.antecedent +
          " says that this head copies information from\n"
          "  it; it does not say that the output depends on it (that takes an intervention or an\n"
          "  attribution, see attn explain --model / attn classify --explain).\n"
          "- A head attending to " +
          o.antecedent +
          " does not mean that the model \"resolved\" the pronoun: heads also attend to\n"
          "  the first token, to neighbours and to punctuation whatever they mean, and the model\n"
          "  was trained for sentence embeddings, not for coreference.\n",
      "- 这些是一次前向计算里的注意力权重，直接取自引擎的融合注意力核：每个头里，查询位置从各个词元的\n"
      "  值向量（Value）里各取多少。\n"
      "- 注意力不是原因。某个头给 " +
          o.antecedent +
          " 的权重大，只说明这个头从它那里搬运信息；不说明输出依赖于它\n"
          "  （那需要干预实验或归因，见 attn explain --model / attn classify --explain）。\n"
          "- 某个头关注 " +
          o.antecedent +
          " 并不等于模型“解决”了代词指代：头也会关注第一个词元、相邻词元和标点，\n"
          "  与含义无关；而且这个模型是为句子向量训练的，不是为指代消解训练的。\n");
  if (res.has_control) {
    // How far the per-layer means move between the sentence and the control.
    double largest = 0;
    int64_t at = 0;
    for (int64_t l = 0; l < res.main.layers; ++l) {
      const double d = std::abs(res.main.antecedent_mean(l) - res.control.antecedent_mean(l));
      if (d > largest) largest = d, at = l;
    }
    s += tr(lang,
            "- The control sentence puts " + o.control_antecedent + " where " + o.antecedent +
                " was. If the weights follow the word in subject position\n  rather than the name, the two "
                "columns agree. "
                "Here they differ by at most " +
                fixed(largest) + " (layer " + std::to_string(at) + ").\n" +
                "  Mind the pieces: " + o.antecedent + " is " + std::to_string(res.main.antecedent.size()) +
                " piece(s), " + o.control_antecedent + " " + std::to_string(res.control.antecedent.size()) +
                "; a sum over more pieces tends to be larger (even shares: " + fixed(even(res.main)) +
                " and " + fixed(even(res.control)) + ").\n",
            "- 对照句把 " + o.antecedent + " 换成了 " + o.control_antecedent +
                "。如果权重跟着主语位置走而不是跟着这个名字走，两列就会接近。\n  这里两列最多相差 " +
                fixed(largest) + "（第 " + std::to_string(at) + " 层）。\n" + "  注意词元数：" +
                o.antecedent + " 占 " + std::to_string(res.main.antecedent.size()) + " 个词元，" +
                o.control_antecedent + " 占 " + std::to_string(res.control.antecedent.size()) +
                " 个；词元越多，权重之和往往越大（平均分配时分别是 " + fixed(even(res.main)) + " 和 " +
                fixed(even(res.control)) + "）。\n");
  }
  const double uniform = even(res.main);
  s += tr(lang,
          "- For scale: weights spread evenly over the " + std::to_string(res.main.tokens.size()) +
              " tokens would put " + fixed(uniform) + " on " + o.antecedent + ".\n",
          "- 作为参照：如果权重平均分给 " + std::to_string(res.main.tokens.size()) + " 个词元，" +
              o.antecedent + " 会得到 " + fixed(uniform) + "。\n");
  return s;
}

}  // namespace

double AttendsRun::antecedent_weight(int64_t l, int64_t h) const {
  double s = 0;
  for (const int64_t j : antecedent) s += at(l, h, j);
  return s;
}

double AttendsRun::antecedent_mean(int64_t l) const {
  double s = 0;
  for (int64_t h = 0; h < heads; ++h) s += antecedent_weight(l, h);
  return heads ? s / static_cast<double>(heads) : 0.0;
}

AttendsResult attends(const AttendsOptions& o) {
  ATTN_CHECK(o.top >= 1, "--attends: expected --top >= 1; got ", o.top);
  ATTN_CHECK(!o.sentence.empty(), "--attends: expected a sentence; got an empty one");
  const models::SentenceEncoder& enc = tasks::load_encoder(o.model);
  AttendsResult res;
  res.model = enc.name();
  res.main = run_sentence(enc, o.sentence, o.query, o.antecedent);
  res.has_control = !o.control.empty();
  if (res.has_control) res.control = run_sentence(enc, o.control, o.query, o.control_antecedent);

  const Lang lang = o.lang;
  const std::string qp = res.main.tokens[static_cast<std::size_t>(res.main.query)];
  std::string title = tr(lang, "attn explain --attends: what " + o.query + " attends to in " + res.model,
                         "attn explain --attends：" + o.query + " 在 " + res.model + " 里关注什么");
  std::string s =
      title + "\n" + std::string(static_cast<std::size_t>(text::display_width(title)), '=') + "\n\n";
  s += tr(
      lang,
      "The tutorial's example: does the pronoun's position look at the word it refers to?\n"
      "A real pretrained encoder (" +
          res.model + ", " + std::to_string(res.main.layers) + " layers x " + std::to_string(res.main.heads) +
          " heads) reads the sentence; for the query's\n"
          "piece we show, per layer and head, the weight it puts on every token (each row sums to 1).\n\n",
      "教程里的例子：代词所在的位置会不会看向它所指的词？下面让一个真实的预训练编码器（" + res.model + "，" +
          std::to_string(res.main.layers) + " 层 × " + std::to_string(res.main.heads) +
          " 个头）读这个句子，\n对查询所在的词元，逐层逐头给出它分给每个词元的权重（每行之和为 1）。\n\n");
  s += describe_run(res.main, o.query, o.antecedent, lang);
  if (res.has_control) {
    s += std::string("\n") + tr(lang, "Control", "对照句") + "\n";
    s += describe_run(res.control, o.query, o.control_antecedent, lang);
  }
  s +=
      "\n" +
      tr(lang, "Per layer: the mean over heads of " + qp + "'s weights (* = a piece of " + o.antecedent + ")",
         "逐层：" + qp + " 的权重在各头上的平均（* 表示 " + o.antecedent + " 的词元）") +
      "\n\n";
  s += layer_table(res, o);
  s += "\n" +
       tr(lang, "Per head: the weight on " + o.antecedent + " (* = it is the head's strongest key)",
          "逐头：给 " + o.antecedent + " 的权重（* 表示它是这个头权重最大的键）") +
       "\n\n";
  s += head_grid(res.main, lang);
  s += "\n" +
       tr(lang, "Per head: the strongest key of " + qp + " and its weight in %",
          "逐头：" + qp + " 权重最大的键和它的权重（%）") +
       "\n\n";
  s += strongest_grid(res.main, lang);
  s += "\n" + caveats(res, o);
  res.report.text = s;

  json::Value& j = res.report.json;
  j.set("mode", json::Value::string("attends"));
  j.set("lang", json::Value::string(lang_name(lang)));
  j.set("model", json::Value::string(res.model));
  j.set("layers", json::Value::integer(res.main.layers));
  j.set("heads", json::Value::integer(res.main.heads));
  j.set("weights_from", json::Value::string("fused attention kernel (capture_attention)"));
  j.set("sentence", run_json(res.main, o.query, o.antecedent, o.top));
  if (res.has_control) j.set("control", run_json(res.control, o.query, o.control_antecedent, o.top));
  return res;
}

}  // namespace attn::teach
