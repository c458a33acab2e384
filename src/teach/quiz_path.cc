// Path-length questions: how many sequential steps information takes from
// position j to position i in an RNN (|i - j|), in self-attention (1), and in
// stacked sliding-window attention (ceil(|i - j| / w) layers). The attention
// answers come from the engine: each layer's visibility is captured with
// attn::attention and the layers are composed until j reaches i.
#include <attn/core/error.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "quiz_internal.h"

namespace attn::teach::quiz {
namespace {

// Layers of attention with mask `m` (Lq = Lk = N) until the output at
// position i depends on the input at position j (both counted from 1 here;
// every text and JSON field shows them from 0).
int64_t layers_needed(const MaskSpec& m, int64_t i, int64_t j) {
  std::vector<std::vector<bool>> sees;  // [N][N] from the engine
  for (int64_t r = 0; r < m.lq; ++r) sees.push_back(engine_visible(m, r));
  std::vector<bool> reached(static_cast<std::size_t>(m.lq), false);  // outputs that depend on input j
  reached[static_cast<std::size_t>(j - 1)] = true;
  for (int64_t layer = 1; layer <= m.lq; ++layer) {
    std::vector<bool> next(reached.size(), false);
    for (std::size_t r = 0; r < next.size(); ++r)
      for (std::size_t c = 0; c < next.size(); ++c) next[r] = next[r] || (sees[r][c] && reached[c]);
    reached = next;
    if (reached[static_cast<std::size_t>(i - 1)]) return layer;
  }
  ATTN_CHECK(false, "quiz: position ", j - 1, " never reaches position ", i - 1, " within ", m.lq, " layers");
  return -1;
}

// RNN steps from j to i (j < i): each step moves information from h_t to h_{t+1}.
int64_t rnn_steps(int64_t i, int64_t j) {
  int64_t at = j, steps = 0;
  while (at < i) ++at, ++steps;
  ATTN_CHECK(steps == std::abs(i - j), "quiz: RNN steps ", steps, " differ from |i - j| = ", std::abs(i - j));
  return steps;
}

}  // namespace

Question path_question(Rng& rng, Lang lang) {
  const bool zh = lang == Lang::zh;
  const int variant = static_cast<int>(rng.range(0, 2));
  const int64_t n = rng.range(6, 12);
  // Two distinct positions, j before i.
  int64_t j = rng.range(1, n), i = rng.range(1, n - 1);
  if (i >= j) ++i;
  if (i < j) std::swap(i, j);
  Question q;
  q.kind = Kind::path;
  q.form = Form::number;
  q.decimals = 0;
  // Shown from 0: position p (counted from 1 above) is p - 1.
  auto at = [](int64_t p) { return std::to_string(p - 1); };
  const std::string si = at(i), sj = at(j), sn = std::to_string(n);
  if (variant == 0) {
    q.topic = "rnn-path";
    q.number = static_cast<double>(rnn_steps(i, j));
    if (zh) {
      q.text = "循环神经网络（RNN）从左到右读取 N = " + sn +
               " 个词元的序列（位置从 0 开始）：\nh_t = f(h_(t-1), x_t)。词元 " + sj +
               " 的信息要经过多少个顺序步骤，\n才能到达位置 " + si + " 的隐藏状态？";
      q.solution = "每一步只把信息从 h_t 传到 h_(t+1)，所以从位置 " + sj + " 到 " + si +
                   " 需要\n|i - j| = |" + si + " - " + sj + "| = " + fixed(q.number, 0) +
                   " 步，一步接一步（信号一路上还会衰减）。\n自注意力直接连接任意两个位置：路径长度为 1。";
    } else {
      q.text = "A recurrent network (RNN) reads a sequence of N = " + sn +
               " tokens left to right\n(positions from 0): "
               "h_t = f(h_(t-1), x_t). How many sequential steps does information from token " +
               sj + " take to reach\nthe hidden state at position " + si + "?";
      q.solution =
          "Each step carries information from h_t to h_(t+1) only, so from position " + sj + " to " + si +
          " it takes\n|i - j| = |" + si + " - " + sj + "| = " + fixed(q.number, 0) +
          (q.number == 1 ? " step" : " steps") +
          ", one after another (and the signal fades on the way).\nSelf-attention connects every pair of "
          "positions directly: a path of length 1.";
    }
  } else if (variant == 1) {
    q.topic = "attention-path";
    if (rng.range(0, 1) == 1) std::swap(i, j);  // either direction: no mask
    MaskSpec m;
    m.lq = m.lk = n;
    q.number = static_cast<double>(layers_needed(m, i, j));
    if (zh) {
      q.text = "一层不带掩码的自注意力读取 N = " + sn + " 个词元的序列。词元 " + at(j) +
               " 的信息需要多少个顺序步骤\n（注意力层）才能到达位置 " + at(i) + " 的输出？";
      q.solution =
          "每个查询直接关注每个键，所以位置 " + at(i) + " 在一层之内就读到词元 " + at(j) +
          "：路径长度为 1，\n与 |i - j| 无关（RNN 需要 |i - j| = " + std::to_string(std::abs(i - j)) +
          " 步）。\n引擎：不带掩码的这一层给查询 " + at(i) + " 在键 " + at(j) + " 上的权重不为零。";
    } else {
      q.text = "A self-attention layer without a mask reads a sequence of N = " + sn +
               " tokens. How many sequential steps\n(attention layers) does information from token " + at(j) +
               " need to reach the output at position " + at(i) + "?";
      q.solution = "Every query attends to every key directly, so position " + at(i) + " reads token " +
                   at(j) + " in one layer: path length 1,\nwhatever |i - j| is (an RNN needs |i - j| = " +
                   std::to_string(std::abs(i - j)) + (std::abs(i - j) == 1 ? " step" : " steps") +
                   ").\nEngine: the unmasked layer gives query " + at(i) + " non-zero weight on key " +
                   at(j) + ".";
    }
  } else {
    q.topic = "window-path";
    // Positions more than w apart, so that one layer is not enough: w < the farthest distance from i.
    const int64_t w = rng.range(1, std::min<int64_t>(3, std::max(i - 1, n - i) - 1));
    while (std::abs(i - j) <= w) j = rng.range(1, n);
    if (rng.range(0, 1) == 1) std::swap(i, j);
    MaskSpec m;
    m.lq = m.lk = n;
    m.window_left = m.window_right = w;
    q.number = static_cast<double>(layers_needed(m, i, j));
    const int64_t dist = std::abs(i - j), formula = (dist + w - 1) / w;
    ATTN_CHECK(static_cast<int64_t>(q.number) == formula, "quiz: the engine's window layers (", q.number,
               ") differ from ceil(|i - j| / w) = ", formula);
    const std::string layers = fixed(q.number, 0);
    if (zh) {
      q.text = "在 N = " + std::to_string(n) +
               " 个词元上堆叠滑动窗口注意力层：每个查询只看两侧各至多\nw = " + std::to_string(w) +
               " 个位置以内的键。词元 " + at(j) + " 的信息需要多少层\n才能到达位置 " + at(i) + " 的输出？";
      q.solution = "每一层最多把信息移动 w = " + std::to_string(w) +
                   " 个位置，所以需要\nceil(|i - j| / w) = ceil(" + std::to_string(dist) + " / " +
                   std::to_string(w) + ") = " + layers +
                   " 层。\n引擎：用 attn::attention 捕获窗口掩码的可见性，逐层复合，词元 " + at(j) +
                   " 在第 " + layers + " 层\n首次连到位置 " + at(i) + "。（完整注意力：1 层；RNN：" +
                   std::to_string(dist) + " 步。）";
    } else {
      q.text = "Stacked sliding-window attention layers over N = " + std::to_string(n) +
               " tokens: each query sees keys at most\nw = " + std::to_string(w) +
               (w == 1 ? " position" : " positions") +
               " away on either side. How many layers does information from token " + at(j) +
               "\nneed to reach the output at position " + at(i) + "?";
      q.solution =
          "Each layer moves information at most w = " + std::to_string(w) +
          (w == 1 ? " position" : " positions") + ", so it takes\nceil(|i - j| / w) = ceil(" +
          std::to_string(dist) + " / " + std::to_string(w) + ") = " + layers +
          " layers.\nEngine: the window mask's visibility, captured with attn::attention and composed "
          "layer after\nlayer, first connects token " +
          at(j) + " to position " + at(i) + " at layer " + layers +
          ". (Full attention: 1 layer; an RNN: " + std::to_string(dist) + " steps.)";
    }
    q.data.set("window", jv(w));
  }
  q.data.set("n", jv(n));
  q.data.set("from", jv(j - 1));
  q.data.set("to", jv(i - 1));
  return q;
}

}  // namespace attn::teach::quiz
