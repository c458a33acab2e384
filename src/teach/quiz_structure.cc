// Structure questions: what a causal or window mask lets a position see (by
// the engine), where Q, K and V come from in cross-attention, parameters and
// FLOPs of a multi-head attention layer, encoder/decoder for a task, and where
// a classifier reads its label.
#include <attn/core/error.h>
#include <attn/ops/attention.h>
#include <attn/text/table.h>

#include <algorithm>
#include <cmath>

#include "quiz_internal.h"

namespace attn::teach::quiz {
namespace {

// "# # # . ." for a row of visibility.
std::string pattern(const std::vector<bool>& v) {
  std::string s;
  for (std::size_t j = 0; j < v.size(); ++j) s += std::string(j ? " " : "") + (v[j] ? "#" : ".");
  return s;
}

std::vector<int64_t> visible_positions(const std::vector<bool>& v) {
  std::vector<int64_t> p;
  for (std::size_t j = 0; j < v.size(); ++j)
    if (v[j]) p.push_back(static_cast<int64_t>(j));
  return p;
}

Question mask_visibility(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  const int variant = static_cast<int>(rng.range(0, 3));
  MaskSpec m;
  // The query and the rule's range of keys, from 0 (the draws pick 1..N; the
  // position is the draw - 1).
  int64_t i = 0, lo = 0, hi = 0;
  std::string setup, rule;
  if (variant == 0) {
    m.lq = m.lk = rng.range(4, 8);
    m.causal = true;
    i = rng.range(1, m.lq) - 1;
    lo = 0, hi = i;
    setup = zh ? "N = " + std::to_string(m.lq) + " 个位置上的因果掩码（解码器；查询 i 对应键 i）。"
               : "A causal mask over N = " + std::to_string(m.lq) +
                     " positions (a decoder; query i sits at key i).";
    rule = zh ? "因果：查询 i 看到 j <= i 的键，所以查询 " + std::to_string(i) + " 看到 0.." +
                    std::to_string(i) + "。"
              : "Causal: query i sees keys j <= i, so query " + std::to_string(i) + " sees 0.." +
                    std::to_string(i) + ".";
  } else if (variant == 1) {
    m.lq = m.lk = rng.range(5, 8);
    const int64_t w = rng.range(1, 2);
    m.window_left = m.window_right = w;
    i = rng.range(1, m.lq) - 1;
    lo = std::max<int64_t>(0, i - w), hi = std::min(m.lk - 1, i + w);
    setup = zh ? "N = " + std::to_string(m.lq) + " 个位置上半宽 w = " + std::to_string(w) +
                     " 的滑动窗口掩码（非因果：\n每个查询看两侧各至多 w 个键）。"
               : "A sliding-window mask of half-width w = " + std::to_string(w) +
                     " over N = " + std::to_string(m.lq) +
                     " positions (not causal:\neach query sees up to w keys on either side).";
    rule = std::string(zh ? "窗口：查询 i 看到键 i-w..i+w，截到 0..N-1 之内："
                          : "Window: query i sees keys i-w..i+w clipped to 0..N-1: ") +
           std::to_string(i) + "-" + std::to_string(w) + ".." + std::to_string(i) + "+" + std::to_string(w) +
           " -> " + std::to_string(lo) + ".." + std::to_string(hi) + tr(lang, ".", "。");
  } else if (variant == 2) {
    m.lq = m.lk = rng.range(5, 8);
    const int64_t w = rng.range(1, 3);
    m.causal = true;
    m.window_left = w, m.window_right = 0;
    i = rng.range(1, m.lq) - 1;
    lo = std::max<int64_t>(0, i - w), hi = i;
    setup = zh ? "N = " + std::to_string(m.lq) + " 个位置上向后看 w = " + std::to_string(w) +
                     " 个位置的因果滑动窗口掩码\n（每个查询看到自己和它前面的 w 个键）。"
               : "A causal sliding-window mask looking back w = " + std::to_string(w) +
                     " positions, over N = " + std::to_string(m.lq) +
                     " positions\n(each query sees itself and the w keys before it).";
    rule = std::string(zh ? "因果窗口：查询 i 看到键 i-w..i，在 0 处截断："
                          : "Causal window: query i sees keys i-w..i clipped at 0: ") +
           std::to_string(i) + "-" + std::to_string(w) + ".." + std::to_string(i) + " -> " +
           std::to_string(lo) + ".." + std::to_string(hi) + tr(lang, ".", "。");
  } else {
    m.lk = rng.range(5, 8);
    m.lq = rng.range(2, 3);
    m.causal = true;
    m.bottom_right = true;
    i = rng.range(1, m.lq) - 1;
    lo = 0, hi = i + m.lk - m.lq;
    if (zh) {
      setup = "KV 缓存解码：缓存中已有 " + std::to_string(m.lk - m.lq) + " 个词元，又来了 " +
              std::to_string(m.lq) + " 个新词元，\n所以 Lq = " + std::to_string(m.lq) +
              " 个查询关注 Lk = " + std::to_string(m.lk) +
              " 个键，因果掩码右下对齐\n（最后一个查询对应最后一个键）。查询 i 对应键位置 i + Lk - Lq。";
      rule = "右下对齐的因果掩码：查询 i 看到 j <= i + Lk - Lq = " + std::to_string(i) + " + " +
             std::to_string(m.lk) + " - " + std::to_string(m.lq) + " = " + std::to_string(hi) + " 的键。";
    } else {
      setup = "KV-cache decoding: " + std::to_string(m.lk - m.lq) + " tokens are in the cache and " +
              std::to_string(m.lq) + " new tokens arrive,\nso Lq = " + std::to_string(m.lq) +
              " queries attend to Lk = " + std::to_string(m.lk) +
              " keys with a causal mask aligned bottom-right\n(the last query is the last "
              "key). Query i is key position i + Lk - Lq.";
      rule = "Bottom-right causal: query i sees keys j <= i + Lk - Lq = " + std::to_string(i) + " + " +
             std::to_string(m.lk) + " - " + std::to_string(m.lq) + " = " + std::to_string(hi) + ".";
    }
  }
  const std::vector<bool> vis = engine_visible(m, i);
  std::vector<int64_t> expect;
  for (int64_t j = lo; j <= hi; ++j) expect.push_back(j);
  const std::vector<int64_t> got = visible_positions(vis);
  ATTN_CHECK(got == expect, "quiz: the engine lets query ", i, " see keys ", positions_text(got),
             "; the mask rule gives ", positions_text(expect));

  Question q;
  q.kind = Kind::structure;
  q.topic = "mask-visibility";
  q.text = setup + (zh ? "\n位置从 0 开始编号。查询 " + std::to_string(i) + " 可以关注哪些键位置？"
                       : "\nPositions are numbered from 0. Which key positions may query " +
                             std::to_string(i) + " attend to?");
  q.form = Form::positions;
  q.positions = expect;
  q.max_position = m.lk - 1;
  std::string key_digits;
  for (int64_t j = 0; j < m.lk; ++j) {
    if (j > 0) key_digits += ' ';
    key_digits += static_cast<char>('0' + j % 10);
  }
  q.solution =
      rule +
      (zh ? "\n引擎的结果一致：用这个掩码运行 attn::attention，所有分数相等，捕获查询 " + std::to_string(i) +
                " 的权重，\n恰好只有可见的键权重不为零：\n  键    "
          : "\nThe engine agrees: attn::attention with this mask, all scores equal and query " +
                std::to_string(i) +
                "'s weights\ncaptured gives non-zero weight exactly to the visible keys:\n  key   ") +
      key_digits + (zh ? "\n  可见  " : "\n  seen  ") + pattern(vis) + "   -> " + positions_text(got);
  q.data.set("lq", jv(m.lq));
  q.data.set("lk", jv(m.lk));
  q.data.set("causal", jv(m.causal));
  q.data.set("align", jv(m.bottom_right ? "bottom_right" : "top_left"));
  q.data.set("window_left", jv(m.window_left));
  q.data.set("window_right", jv(m.window_right));
  q.data.set("query", jv(i));
  return q;
}

Question cross_attention(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  const int part = static_cast<int>(rng.range(0, 2));  // Q, K, V
  static const char* kNames[] = {"queries (Q)", "keys (K)", "values (V)"};
  Question q;
  q.kind = Kind::structure;
  q.topic = "cross-attention";
  static const char* kNamesZh[] = {"查询（Q）", "键（K）", "值（V）"};
  q.text = zh ? std::string(
                    "在编码器-解码器 Transformer "
                    "中，每个解码器层都有一个交叉注意力（编码器-解码器注意力）\n子层。它的") +
                    kNamesZh[part] + "来自哪里？"
              : std::string(
                    "In an encoder-decoder Transformer, each decoder layer has a cross-attention "
                    "(encoder-decoder\n"
                    "attention) sublayer. Where do its ") +
                    kNames[part] + " come from?";
  q.form = Form::choice;
  q.choices = {
      choice(lang, "the decoder", "解码器", {"decoder", "from the decoder", "来自解码器", "解码器端"}),
      choice(lang, "the encoder", "编码器", {"encoder", "from the encoder", "来自编码器", "编码器端"})};
  q.answer = part == 0 ? 0 : 1;
  shuffle_choices(q, rng);

  // The shapes, by the engine: queries from a decoder of Lt positions, keys and
  // values from an encoder of Ls positions.
  const int64_t lt = rng.range(2, 4), ls = rng.range(5, 7), d = 4;
  const Tensor dec = Tensor::zeros({1, 1, lt, d}, DType::f64);  // q: [1, 1, Lt, d]
  const Tensor enc = Tensor::zeros({1, 1, ls, d}, DType::f64);  // k, v: [1, 1, Ls, d]
  AttentionOptions o;
  o.backend = Backend::reference;
  o.capture.enabled = true;
  const AttentionResult r = attention(dec, enc, enc, o);
  ATTN_CHECK(r.out.shape() == Shape({1, 1, lt, d}) && r.weights.shape() == Shape({1, 1, lt, ls}),
             "quiz: cross-attention shapes: expected out [1, 1, ", lt, ", ", d, "] and weights [1, 1, ", lt,
             ", ", ls, "]; got ", shape_str(r.out.shape()), " and ", shape_str(r.weights.shape()));
  if (zh) {
    q.solution =
        "Q 来自解码器（它的带掩码自注意力子层的输出）：每个目标位置提出它需要什么。\nK 和 V "
        "来自编码器的最终输出：源句子提供它含有的内容。所以" +
        std::string(kNamesZh[part]) + "来自" + q.choices[static_cast<std::size_t>(q.answer)].text +
        "。\n引擎实际运行的形状：解码器 " + std::to_string(lt) + " 个位置，编码器 " + std::to_string(ls) +
        " 个位置：attn::attention(q " + shape_str(dec.shape()) + ",\nk, v " + shape_str(enc.shape()) +
        ") 返回 out " + shape_str(r.out.shape()) + "（每个解码器位置一行）和权重 " +
        shape_str(r.weights.shape()) + "\n（每个解码器位置在编码器各位置上的分布）。";
  } else {
    q.solution =
        "Q comes from the decoder (the output of its masked self-attention sublayer): each target position\n"
        "asks what it needs. K and V come from the encoder's final output: the source sentence offers what\n"
        "it contains. So the " +
        std::string(kNames[part]) + " come from " + q.choices[static_cast<std::size_t>(q.answer)].text +
        ".\nShapes, run by the engine: decoder of " + std::to_string(lt) + " positions, encoder of " +
        std::to_string(ls) + ": attn::attention(q " + shape_str(dec.shape()) + ",\nk, v " +
        shape_str(enc.shape()) + ") returns out " + shape_str(r.out.shape()) +
        " (one row per decoder position) and weights " + shape_str(r.weights.shape()) +
        "\n(each decoder position's distribution over the encoder positions).";
  }
  q.data.set("asked", jv(part == 0 ? "Q" : part == 1 ? "K" : "V"));
  return q;
}

// Multi-head attention sizes drawn at random: d_model, h dividing it, N.
struct Sizes {
  int64_t d, h, n;
};
Sizes draw_sizes(Rng& rng, const std::vector<int64_t>& ds, const std::vector<int64_t>& ns) {
  Sizes s;
  s.d = rng.pick(ds);
  std::vector<int64_t> hs;
  for (int64_t h : {2, 4, 8, 12, 16})
    if (s.d % h == 0) hs.push_back(h);
  s.h = rng.pick(hs);
  s.n = rng.pick(ns);
  return s;
}

Question mha_params(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  const Sizes s = draw_sizes(rng, {64, 128, 256, 512, 768, 1024}, {128, 512, 2048});
  const bool bias = rng.range(0, 1) == 1;
  // Per projection: h heads, each a [d, d_k] slice (+ d_k biases); W_O is [d, d] (+ d biases).
  const int64_t dk = s.d / s.h;
  const int64_t per_qkv = s.h * (s.d * dk + (bias ? dk : 0)), wo = s.d * s.d + (bias ? s.d : 0);
  const int64_t total = 3 * per_qkv + wo;
  const int64_t formula = 4 * s.d * s.d + (bias ? 4 * s.d : 0);
  ATTN_CHECK(total == formula, "quiz: parameters summed per head (", total, ") differ from the formula (",
             formula, ")");

  Question q;
  q.kind = Kind::structure;
  q.topic = "mha-params";
  if (zh) {
    q.text = "一个多头注意力层 d_model = " + std::to_string(s.d) + "，h = " + std::to_string(s.h) +
             " 个头，处理长度 N = " + std::to_string(s.n) + " 的序列。\n它的投影 W_Q、W_K、W_V、W_O " +
             (bias ? "带偏置" : "不带偏置") + "。这一层共有多少个参数？";
  } else {
    q.text = "A multi-head attention layer has d_model = " + std::to_string(s.d) +
             " and h = " + std::to_string(s.h) +
             " heads, applied to sequences of N = " + std::to_string(s.n) +
             " tokens.\nIts projections W_Q, W_K, "
             "W_V, W_O " +
             (bias ? "have biases" : "have no biases") + ". How many parameters does the layer have?";
  }
  q.form = Form::number;
  q.number = static_cast<double>(total);
  q.decimals = 0;
  const std::string d = std::to_string(s.d);
  if (zh) {
    q.solution = "W_Q、W_K、W_V 和 W_O 各是 d_model × d_model = " + d + " × " + d + " = " +
                 with_commas(s.d * s.d) + " 个权重。\n" + std::to_string(s.h) +
                 " 个头只是把 W_Q、W_K、W_V 切成 " + std::to_string(s.h) +
                 " 份，每份 d_k = " + std::to_string(dk) + " 列；\n不增加参数。4 × " +
                 with_commas(s.d * s.d) + " = " + with_commas(4 * s.d * s.d) + "。\n" +
                 (bias ? "偏置：4 × d_model = " + with_commas(4 * s.d) + "。合计 4·d_model² + 4·d_model = "
                       : "无偏置：合计 4·d_model² = ") +
                 with_commas(total) + "。\nN 不影响参数量：每个位置共用同一组权重。";
  } else {
    q.solution = "W_Q, W_K, W_V and W_O are each d_model × d_model = " + d + " × " + d + " = " +
                 with_commas(s.d * s.d) + " weights.\nThe " + std::to_string(s.h) +
                 " heads only split W_Q, W_K, W_V into " + std::to_string(s.h) +
                 " slices of d_k = " + std::to_string(dk) + " columns each;\nthey add no parameters. 4 × " +
                 with_commas(s.d * s.d) + " = " + with_commas(4 * s.d * s.d) + ".\n" +
                 (bias ? "Biases: 4 × d_model = " + with_commas(4 * s.d) + ". Total 4·d_model² + 4·d_model = "
                       : "No biases: total 4·d_model² = ") +
                 with_commas(total) + ".\nN does not matter: the same weights serve every position.";
  }
  q.data.set("d_model", jv(s.d));
  q.data.set("heads", jv(s.h));
  q.data.set("n", jv(s.n));
  q.data.set("bias", jv(bias));
  return q;
}

Question mha_flops(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  const Sizes s = draw_sizes(rng, {64, 128, 256, 512}, {16, 64, 128, 256, 512});
  const int64_t d = s.d, n = s.n, h = s.h, dk = d / h;
  // Each step as the multiply-adds it does (× 2 FLOPs).
  const int64_t proj = 3 * 2 * n * d * d;       // Q, K, V = X · W: [N, d] · [d, d], three times
  const int64_t scores = h * 2 * n * n * dk;    // per head: Q_h · K_hᵀ, [N, d_k] · [d_k, N]
  const int64_t weighted = h * 2 * n * n * dk;  // per head: P_h · V_h, [N, N] · [N, d_k]
  const int64_t out = 2 * n * d * d;            // concat · W_O: [N, d] · [d, d]
  const int64_t total = proj + scores + weighted + out;
  ATTN_CHECK(total == 8 * n * d * d + 4 * n * n * d, "quiz: FLOPs summed per step (", total,
             ") differ from 8·N·d² + 4·N²·d (", 8 * n * d * d + 4 * n * n * d, ")");

  Question q;
  q.kind = Kind::structure;
  q.topic = "mha-flops";
  q.text = zh ? "一个多头自注意力层 d_model = " + std::to_string(d) + "，h = " + std::to_string(h) +
                    " 个头；一个长度 N = " + std::to_string(n) +
                    " 的序列。\n它的前向计算需要多少 FLOPs？约定：只数矩阵乘法，一次乘加算 2 "
                    "FLOPs；\nsoftmax、缩放和偏置不计。"
              : "A multi-head self-attention layer has d_model = " + std::to_string(d) +
                    " and h = " + std::to_string(h) + " heads; one sequence of N = " + std::to_string(n) +
                    " tokens.\nHow many FLOPs does its forward pass take? Convention: count the matrix "
                    "products only, a "
                    "multiply-add\nis 2 FLOPs; softmax, scaling and biases are not counted.";
  q.form = Form::number;
  q.number = static_cast<double>(total);
  q.decimals = 0;
  q.rel_tol = 1e-3;
  text::Table t({{tr(lang, "step", "步骤"), text::Align::left},
                 {tr(lang, "formula", "公式"), text::Align::left},
                 {"FLOPs", text::Align::right}});
  t.row({tr(lang, "Q, K, V projections", "Q、K、V 投影"), "3 × 2·N·d²", with_commas(proj)})
      .row({tr(lang, "scores Q·Kᵀ", "分数 Q·Kᵀ"), "h × 2·N²·d_k = 2·N²·d", with_commas(scores)})
      .row({tr(lang, "weights · V", "权重 · V"), "h × 2·N²·d_k = 2·N²·d", with_commas(weighted)})
      .row({tr(lang, "output projection", "输出投影"), "2·N·d²", with_commas(out)})
      .row({tr(lang, "total", "合计"), "8·N·d² + 4·N²·d", with_commas(total)});
  q.solution = t.render("") + tr(lang, "(", "（") + "N = " + std::to_string(n) +
               ", d = d_model = " + std::to_string(d) + ", d_k = d/h = " + std::to_string(dk) +
               tr(lang, "; the head count cancels out.)", "；头数相互抵消。）");
  q.data.set("d_model", jv(d));
  q.data.set("heads", jv(h));
  q.data.set("n", jv(n));
  return q;
}

struct Task {
  const char* text;
  int answer;  // 0 encoder only, 1 decoder only, 2 both
  const char* why;
  const char* text_zh;
  const char* why_zh;
};

Question architecture(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  static const std::vector<Task> kTasks = {
      {"sentiment classification of movie reviews (positive or negative)", 0,
       "The whole review is read at once and one label comes out: an encoder (bidirectional attention),\n"
       "with a classifier on the [CLS] token's output.",
       "电影评论的情感分类（正面或负面）",
       "整条评论一次读完，输出一个标签：编码器（双向注意力），\n在 [CLS] 词元的输出上接一个分类器。"},
      {"tagging each word of a sentence as person, place, organisation or none", 0,
       "One label per input token, every token may look both ways: an encoder with a classifier on each\n"
       "token's output.",
       "给句子中的每个词标注人名、地名、机构名或都不是",
       "每个输入词元一个标签，每个词元都可以前后双向看：编码器，\n在每个词元的输出上接分类器。"},
      {"detecting whether an e-mail is spam", 0,
       "Read the whole text and output one label: an encoder with a classifier on [CLS].",
       "判断一封电子邮件是不是垃圾邮件", "读完整段文本，输出一个标签：编码器，在 [CLS] 上接分类器。"},
      {"translating German sentences into English", 2,
       "The source is read whole by an encoder; the target is generated token by token by a decoder\n"
       "that attends to the encoder through cross-attention: both.",
       "把德语句子翻译成英语",
       "编码器完整读入源句；解码器逐个词元生成目标句，\n并通过交叉注意力关注编码器：两者都要。"},
      {"summarising a news article into a headline", 2,
       "A long input is read whole and a new, shorter text is generated: encoder and decoder\n"
       "(sequence to sequence).",
       "把一篇新闻报道概括成一个标题",
       "完整读入长输入，再生成一段新的、更短的文本：编码器和解码器\n（序列到序列）。"},
      {"transcribing speech audio into text", 2,
       "The audio is encoded whole; the text is generated by a decoder attending to it: both.",
       "把语音转写成文字", "音频整体编码；文字由关注它的解码器生成：两者都要。"},
      {"continuing a story from a prompt", 1,
       "Generate the next token again and again, each seeing only the past: a decoder with a causal mask.",
       "根据开头续写一个故事", "一次又一次地生成下一个词元，每次只看过去：带因果掩码的解码器。"},
      {"autocompleting code as a programmer types", 1,
       "Left-to-right next-token prediction from the text so far: a decoder (causal).",
       "在程序员打字时自动补全代码", "根据已有文本从左到右预测下一个词元：解码器（因果）。"},
  };
  const Task& t = rng.pick(kTasks);
  Question q;
  q.kind = Kind::structure;
  q.topic = "architecture";
  q.text = zh ? std::string("哪种 Transformer 最适合这个任务？\n任务：") + t.text_zh + "。"
              : std::string("Which Transformer fits this task best?\nTask: ") + t.text + ".";
  q.form = Form::choice;
  q.choices = {
      choice(lang, "encoder only", "仅编码器",
             {"encoder", "encoder-only", "只用编码器", "编码器", "只有编码器", "纯编码器", "仅用编码器"}),
      choice(lang, "decoder only", "仅解码器",
             {"decoder", "decoder-only", "只用解码器", "解码器", "只有解码器", "纯解码器", "仅用解码器"}),
      choice(lang, "encoder and decoder (both)", "编码器-解码器（两者都要）",
             {"both", "encoder-decoder", "encoder and decoder", "encoderdecoder", "seq2seq", "编码器-解码器",
              "编码器解码器", "编码器和解码器", "编码器与解码器", "编码器加解码器", "编解码器", "两者",
              "两者都要", "都要", "都用", "两个都要"})};
  q.answer = t.answer;
  q.solution =
      zh ? std::string(t.why_zh) + "\n答案：" + q.choices[static_cast<std::size_t>(t.answer)].text + "。"
         : std::string(t.why) + "\nAnswer: " + q.choices[static_cast<std::size_t>(t.answer)].text + ".";
  q.data.set("task", jv(t.text));
  return q;
}

Question classifier_token(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  Question q;
  q.kind = Kind::structure;
  q.topic = "classifier-token";
  const int64_t n = rng.range(4, 8);
  if (rng.range(0, 1) == 0) {
    // Encoder: no mask; position 0 ([CLS]) sees every token.
    MaskSpec m;
    m.lq = m.lk = n;
    const std::vector<bool> vis = engine_visible(m, 0);
    ATTN_CHECK(std::all_of(vis.begin(), vis.end(), [](bool b) { return b; }),
               "quiz: without a mask, the engine hides some keys from position 0");
    q.text = zh ? "一个编码器分类器（BERT 式）读取 " + std::to_string(n) +
                      " 个词元的句子，句首加了一个特殊词元。\n它的分类器从哪个词元的最终输出读取标签？"
                : "An encoder classifier (BERT-style) reads a sentence of " + std::to_string(n) +
                      " tokens, with a special token prepended.\nFrom which token's final output does its "
                      "classifier read the label?";
    q.form = Form::choice;
    q.choices = {
        choice(
            lang, "[CLS], the first token", "[CLS]，第一个词元",
            {"cls", "[cls]", "first", "first token", "the first token", "第一个", "第一个词元", "首个词元"}),
        choice(lang, "the last token", "最后一个词元", {"last", "last token", "最后一个", "最后"}),
        choice(lang, "[SEP], the separator at the end", "[SEP]，末尾的分隔符", {"sep", "[sep]", "分隔符"})};
    q.answer = 0;
    shuffle_choices(q, rng);
    if (zh) {
      q.solution =
          "BERT 在位置 0 放上 [CLS]，并在它的最终输出上接一个线性分类器。没有掩码时\n每个位置都能看到每个词元"
          "（引擎：不带掩码的注意力给位置 0 在键 " +
          positions_text(visible_positions(vis)) +
          " 上的权重都不为零），\n所以几层之后 [CLS] 的输出概括了整个句子，预训练（下一句预测）也教它这样做。"
          "答案：" +
          q.choices[static_cast<std::size_t>(q.answer)].text + "。";
    } else {
      q.solution =
          "BERT prepends [CLS] at position 0 and puts a linear classifier on its final output. With no mask\n"
          "every position sees every token (engine: unmasked attention gives position 0 non-zero weight on\n"
          "keys " +
          positions_text(visible_positions(vis)) +
          "), so after a few layers the [CLS] output summarises the whole sentence,\nand pre-training "
          "(next-sentence prediction) taught it to. Answer: " +
          q.choices[static_cast<std::size_t>(q.answer)].text + ".";
    }
  } else {
    // Decoder: causal; only the last position has seen every token.
    MaskSpec m;
    m.lq = m.lk = n;
    m.causal = true;
    std::vector<int64_t> all;
    std::string rows;
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<bool> vis = engine_visible(m, i);
      rows += (zh ? "\n  查询 " : "\n  query ") + std::to_string(i) + ": " + pattern(vis);
      if (std::all_of(vis.begin(), vis.end(), [](bool b) { return b; })) all.push_back(i);
    }
    ATTN_CHECK(all == std::vector<int64_t>{n - 1}, "quiz: with a causal mask the engine lets positions ",
               positions_text(all), " see every token; expected only ", n - 1);
    if (zh) {
      q.text = "一个仅解码器模型（因果掩码）读取 " + std::to_string(n) +
               " 个词元的序列，并从某一个位置的最终输出做分类。\n哪个位置（从 0 数）的输出看到了所有词元？";
    } else {
      q.text =
          "A decoder-only model (causal mask) reads a sequence of " + std::to_string(n) +
          " tokens and classifies it from one position's\nfinal output. Which position's output (counting "
          "from 0) "
          "has seen every token?";
    }
    q.form = Form::positions;
    q.positions = all;
    q.max_position = n - 1;
    q.solution =
        zh ? "因果掩码下，位置 i 只看到词元 0..i（引擎，所有分数相等，# = 权重不为零）：" + rows +
                 "\n只有最后一个位置 " + std::to_string(n - 1) +
                 " 看到了所有词元，所以 GPT 式分类器在那里读取标签。"
           : "With a causal mask, position i sees only tokens 0..i (engine, all scores equal, # = non-zero "
             "weight):" +
                 rows + "\nOnly the last position, " + std::to_string(n - 1) +
                 ", has seen every token, so GPT-style classifiers read the label there.";
  }
  q.data.set("n", jv(n));
  return q;
}

}  // namespace

Question structure_question(Rng& rng, Lang lang) {
  switch (rng.range(0, 6)) {
    case 0:
      return mask_visibility(rng, lang);
    case 1:
      return cross_attention(rng, lang);
    case 2:
      return mha_params(rng, lang);
    case 3:
      return mha_flops(rng, lang);
    case 4:
      return architecture(rng, lang);
    case 5:
      return classifier_token(rng, lang);
    default:
      return claim_question(rng, lang);
  }
}

}  // namespace attn::teach::quiz
