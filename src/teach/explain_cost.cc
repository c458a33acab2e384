// --cost: shapes, FLOPs and memory of every step of multi-head attention for
// given sizes; the O(N²) score matrix of a naive implementation against the
// O(threads × tile) scratch of a fused (tiled, online-softmax) kernel; and the
// backend attn would choose (attn::choose_backend).
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "explain_internal.h"

namespace attn::teach {
namespace {

// The tile the memory model assumes for a fused kernel: Br query rows × Bc keys.
constexpr int64_t kTileRows = 64, kTileCols = 64;
constexpr int64_t kFloat = 4;  // bytes per fp32 value

// a · b, throwing when it does not fit in int64.
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  ATTN_CHECK(!__builtin_mul_overflow(a, b, &r), "--cost: the sizes are too large: ", a, " x ", b,
             " overflows a 64-bit count; expected smaller --n, --d, --heads or --batch");
  return r;
}
int64_t mul(std::initializer_list<int64_t> xs) {
  int64_t r = 1;
  for (int64_t x : xs) r = mul(r, x);
  return r;
}
int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  ATTN_CHECK(!__builtin_add_overflow(a, b, &r), "--cost: the sizes are too large: a total overflows 64 bits");
  return r;
}

// One cost row: a step of multi-head attention.
struct Step {
  std::string name, op, shape;
  int64_t flops, bytes;
};

// The Chinese names of the steps and operations (the JSON keeps the English ones).
std::string step_name(Lang lang, const std::string& en) {
  static const std::vector<std::pair<std::string, std::string>> kZh = {{"project", "投影"},
                                                                       {"scores", "分数"},
                                                                       {"softmax", "softmax"},
                                                                       {"weighted sum", "加权求和"},
                                                                       {"out projection", "输出投影"}};
  if (lang == Lang::zh)
    for (const auto& [e, z] : kZh)
      if (e == en) return z;
  return en;
}
std::string step_op(Lang lang, const std::string& en) {
  static const std::vector<std::pair<std::string, std::string>> kZh = {
      {"Q, K, V = X · W_Q, W_K, W_V", "Q, K, V = X · W_Q, W_K, W_V"},
      {"S = Q · Kᵀ per head", "每个头 S = Q · Kᵀ"},
      {"scale, max, subtract, sum, divide (+ exp)", "缩放、求最大值、相减、求和、相除（+ exp）"},
      {"O = P · V per head", "每个头 O = P · V"},
      {"concat heads · W_O", "拼接各头 · W_O"}};
  if (lang == Lang::zh)
    for (const auto& [e, z] : kZh)
      if (e == en) return z;
  return en;
}
// Why attn chooses its backend, in Chinese (ops words it in English; the ISA name is taken from it).
std::string reason_zh(const BackendChoice& c) {
  const std::string& why = c.reason;
  if (why.rfind("requested explicitly", 0) == 0)
    return "显式指定" + why.substr(std::string("requested explicitly").size());
  if (why.rfind("f64 inputs", 0) == 0) return "输入是 f64：融合核按 fp32 计算，所以运行 f64 参考实现";
  const auto open = why.find('('), close = why.find(')');
  const std::string isa =
      open != std::string::npos && close > open ? why.substr(open + 1, close - open - 1) : "?";
  return "融合 CPU 核（" + isa +
         "）：按键块分块的在线 softmax，线程按 批 x 头 x 查询块 划分，\n      不分配 Lq x Lk 的缓冲区";
}

// The shapes, FLOPs, memory and backend of one set of sizes (compute_cost), and
// the sections of the text and the JSON written from them.
struct Cost {
  const CostOptions& p;
  int64_t B, N, D, H, dk;
  int64_t pairs, bh_pairs;  // query-key pairs per (batch, head); over all of them
  std::string sB, sN, sD, sH, sK;
  std::vector<Step> steps;
  int64_t total, exps;
  int threads;
  int64_t br, bc, tile_floats, fused_scratch, naive_scores, lse_bytes, qkv_bytes;
  BackendChoice choice;
  std::string backend;

  void steps_text(Page& r) const;   // the sizes and every step
  void memory_text(Page& r) const;  // the score matrix, naive against fused; the backend
  void to_json(Page& r) const;
};

Cost compute_cost(const CostOptions& p) {
  ATTN_CHECK(p.heads >= 1 && p.d % p.heads == 0, "--heads must divide --d (d_model = ", p.d,
             "); got --heads ", p.heads, " (", p.d, " / ", p.heads, " is not a whole number)");
  const int64_t B = p.batch, N = p.n, D = p.d, H = p.heads, dk = D / H;
  // Query-key pairs that are computed per (batch, head): all, or the causal triangle.
  const int64_t pairs = p.causal ? mul(N, N + 1) / 2 : mul(N, N);
  const int64_t bh_pairs = mul({B, H, pairs});

  const std::string sB = std::to_string(B), sN = std::to_string(N), sD = std::to_string(D),
                    sH = std::to_string(H), sK = std::to_string(dk);
  const std::vector<Step> steps = {
      {"project", "Q, K, V = X · W_Q, W_K, W_V", "3 x [" + sB + ", " + sN + ", " + sD + "]",
       mul({3, 2, B, N, D, D}), mul({3, kFloat, B, N, D})},
      {"scores", "S = Q · Kᵀ per head", "[" + sB + ", " + sH + ", " + sN + ", " + sN + "]",
       mul({2, dk, bh_pairs}), mul({kFloat, B, H, N, N})},
      {"softmax", "scale, max, subtract, sum, divide (+ exp)",
       "[" + sB + ", " + sH + ", " + sN + ", " + sN + "]", mul(5, bh_pairs), 0},
      {"weighted sum", "O = P · V per head", "[" + sB + ", " + sH + ", " + sN + ", " + sK + "]",
       mul({2, dk, bh_pairs}), mul({kFloat, B, N, D})},
      {"out projection", "concat heads · W_O", "[" + sB + ", " + sN + ", " + sD + "]", mul({2, B, N, D, D}),
       mul({kFloat, B, N, D})},
  };
  int64_t total = 0;
  for (const auto& s : steps) total = add(total, s.flops);
  const int64_t exps = bh_pairs;

  const int threads = num_threads();
  const int64_t br = std::min(kTileRows, N), bc = std::min(kTileCols, N);  // no tile larger than the sequence
  const int64_t tile_floats = br * bc + br * dk + 2 * br;                  // S tile, O accumulator, max & sum
  const int64_t fused_scratch = mul({threads, tile_floats, kFloat});
  const int64_t naive_scores = mul({kFloat, B, H, N, N});
  const int64_t lse_bytes = mul({kFloat, B, H, N});
  const int64_t qkv_bytes = mul({3, kFloat, B, N, D});

  // The backend attn would pick, from stride-0 views (no memory for the real sizes).
  const Tensor one = Tensor::zeros({1, 1, 1, 1});
  const Tensor q = one.expand({B, H, N, dk});  // q: [B, H, N, d_k]
  AttentionOptions o;
  o.causal = p.causal;
  const BackendChoice choice = choose_backend(q, q, q, o);
  const std::string backend = choice.backend == Backend::fused ? "fused" : "reference";
  return Cost{p,
              B,
              N,
              D,
              H,
              dk,
              pairs,
              bh_pairs,
              sB,
              sN,
              sD,
              sH,
              sK,
              steps,
              total,
              exps,
              threads,
              br,
              bc,
              tile_floats,
              fused_scratch,
              naive_scores,
              lse_bytes,
              qkv_bytes,
              choice,
              backend};
}

void Cost::steps_text(Page& r) const {
  r.title(r.t("attn explain --cost: what attention costs at these sizes",
              "attn explain --cost：这种规模下注意力的开销"));
  r.line(r.t("Sizes: batch B = " + sB + ", sequence length N = " + with_commas(N) + ", d_model = " + sD +
                 ", heads h = " + sH + ",\n       d_k = d_model / h = " + sK +
                 (p.causal ? ", causal" : ", not causal"),
             "规模：批大小 B = " + sB + "，序列长度 N = " + with_commas(N) + "，d_model = " + sD +
                 "，头数 h = " + sH + "，\n      d_k = d_model / h = " + sK +
                 (p.causal ? "，因果" : "，非因果")));
  const std::string causal_en =
      p.causal
          ? "\nCausal: each query sees only itself and earlier keys, so N·(N+1)/2 = " + with_commas(pairs) +
                " of the\nN² = " + with_commas(mul(N, N)) + " query-key pairs per head are computed."
          : "";
  const std::string causal_zh =
      p.causal
          ? "\n因果：每个查询只能看到它自己和它之前的键，所以只需计算 N·(N+1)/2 = " + with_commas(pairs) +
                " 个\n查询-键对（每个头共有 N² = " + with_commas(mul(N, N)) + " 个）。"
          : "";
  r.para(r.t("FLOPs count one multiply-add as 2; memory is fp32 (4 bytes per value)." + causal_en,
             "FLOPs 把一次乘加算作 2 次运算；内存按 fp32 计（每个值 4 字节）。" + causal_zh));
  r.heading(r.t("Every step", "每一步"));
  {
    text::Table t({{r.t("step", "步骤"), text::Align::left},
                   {r.t("operation", "运算"), text::Align::left},
                   {r.t("result shape", "结果形状"), text::Align::left},
                   {"FLOPs", text::Align::right},
                   {"", text::Align::right},
                   {r.t("result size", "结果大小"), text::Align::right}});
    for (const auto& s : steps)
      t.row({step_name(r.lang, s.name), step_op(r.lang, s.op), s.shape, with_commas(s.flops),
             human_count(static_cast<double>(s.flops)),
             s.bytes ? human_bytes(static_cast<double>(s.bytes)) : r.t("in place", "原地")});
    t.row({r.t("total", "合计"), "", "", with_commas(total), human_count(static_cast<double>(total)), ""});
    r.table(t);
  }
  r.para(
      r.t("Softmax counts 5 FLOPs per score (scale, max, subtract, sum, divide); the exp evaluations are "
          "counted\n"
          "apart: " +
              with_commas(exps) +
              " (one per computed score).\n"
              "Scores and weighted sum cost 2·B·h·pairs·d_k each, the projections 2·B·N·d_model² each: "
              "attention\n"
              "itself grows with N², the projections with N.",
          "softmax 每个分数记 5 次运算（缩放、求最大值、相减、求和、相除）；exp 另外单独计数：\n" +
              with_commas(exps) +
              " 次（每个算出的分数一次）。\n"
              "分数和加权求和各需 2·B·h·pairs·d_k，每个投影需 2·B·N·d_model²：注意力本身随 N² 增长，\n"
              "投影只随 N 增长。"));
}

void Cost::memory_text(Page& r) const {
  r.heading(r.t("Memory: the N x N score matrix", "内存：N x N 的分数矩阵"));
  {
    text::Table t({{"", text::Align::left},
                   {r.t("formula", "公式"), text::Align::left},
                   {r.t("bytes", "字节"), text::Align::right},
                   {"", text::Align::right}});
    t.row({r.t("naive: full score matrix", "朴素实现：完整的分数矩阵"), "B·h·N·N·4",
           with_commas(naive_scores), human_bytes(static_cast<double>(naive_scores))});
    t.row({r.t("fused: per-thread tiles", "融合核：每个线程的分块"), "threads·(Br·Bc + Br·d_k + 2·Br)·4",
           with_commas(fused_scratch), human_bytes(static_cast<double>(fused_scratch))});
    t.row({r.t("fused: saved log-sum-exp", "融合核：保存的 log-sum-exp"), "B·h·N·4", with_commas(lse_bytes),
           human_bytes(static_cast<double>(lse_bytes))});
    t.row({r.t("both: Q, K, V", "两者都要：Q、K、V"), "3·B·N·d_model·4", with_commas(qkv_bytes),
           human_bytes(static_cast<double>(qkv_bytes))});
    r.table(t);
  }
  const double ratio = static_cast<double>(naive_scores) / static_cast<double>(fused_scratch);
  const std::string naive = human_bytes(static_cast<double>(naive_scores)), th = std::to_string(threads),
                    tile = std::to_string(br) + " x " + std::to_string(bc);
  r.para(r.t("A naive implementation stores all scores S = Q·Kᵀ (" + naive + ") before the softmax" +
                 (p.causal ? ",\neven though causal masking hides about half of them." : ".") +
                 "\nA fused kernel walks over key tiles with an online softmax (running max and sum per "
                 "row), so it\n"
                 "only ever holds one Br x Bc tile per thread: threads = " +
                 th + " (attn::num_threads(); ATTN_NUM_THREADS\noverrides), tile Br x Bc = " + tile +
                 " (this model's assumption; the kernel picks its own tiles).\n" +
                 (ratio >= 1 ? "Naive scores / fused scratch: " + with_commas(std::llround(ratio)) + " x."
                             : std::string("At this small N the naive matrix is smaller than the tiles.")),
             "朴素实现要在 softmax 之前存下全部分数 S = Q·Kᵀ（" + naive + "）" +
                 (p.causal ? "，\n尽管因果掩码会遮住其中大约一半。" : "。") +
                 "\n融合核用在线 softmax（每行随时更新最大值与累加和）逐块扫过键，因此每个线程\n"
                 "任何时候都只保留一个 Br x Bc 的分块：线程数 = " +
                 th + "（attn::num_threads()；可用 ATTN_NUM_THREADS\n覆盖），分块 Br x Bc = " + tile +
                 "（这是本估算的假设；核函数会自己选择分块）。\n" +
                 (ratio >= 1 ? "朴素分数矩阵 / 融合核临时空间 = " + with_commas(std::llround(ratio)) + " 倍。"
                             : std::string("N 这么小时，朴素的分数矩阵比分块还小。"))));
  {
    text::Table t({{"N", text::Align::right},
                   {r.t("naive scores", "朴素分数矩阵"), text::Align::right},
                   {r.t("fused scratch", "融合核临时空间"), text::Align::right},
                   {"Q, K, V", text::Align::right}});
    for (int64_t f : {1, 2, 4, 8}) {
      int64_t n2 = 0;
      if (__builtin_mul_overflow(N, f, &n2)) break;
      int64_t nb = 0;
      if (__builtin_mul_overflow(naive_scores, f * f, &nb)) break;
      t.row({with_commas(n2), human_bytes(static_cast<double>(nb)),
             human_bytes(static_cast<double>(fused_scratch)),
             human_bytes(static_cast<double>(qkv_bytes) * static_cast<double>(f))});
    }
    r.para(r.t("Doubling N quadruples the naive score matrix; the fused scratch does not grow:",
               "N 翻倍，朴素分数矩阵变为四倍；融合核的临时空间不变："));
    r.table(t);
  }

  r.heading(
      r.t("Which kernel attn chooses (attn::choose_backend)", "attn 选择哪个核（attn::choose_backend）"));
  r.para(r.t("backend: " + backend + "\nreason:  " + choice.reason,
             "后端：" + backend + "\n原因：" + reason_zh(choice)));
}

void Cost::to_json(Page& r) const {
  json::Value& j = r.json;
  j.set("mode", jv("cost"));
  j.set("batch", jv(B));
  j.set("n", jv(N));
  j.set("d_model", jv(D));
  j.set("heads", jv(H));
  j.set("d_k", jv(dk));
  j.set("causal", jv(p.causal));
  j.set("pairs_per_head", jv(pairs));
  json::Value js = json::Value::array();
  for (const auto& s : steps) {
    json::Value e = json::Value::object();
    e.set("step", jv(s.name));
    e.set("operation", jv(s.op));
    e.set("shape", jv(s.shape));
    e.set("flops", jv(s.flops));
    e.set("bytes", jv(s.bytes));
    js.push_back(std::move(e));
  }
  j.set("steps", jv(std::move(js)));
  j.set("flops_total", jv(total));
  j.set("exp_count", jv(exps));
  json::Value mem = json::Value::object();
  mem.set("naive_scores_bytes", jv(naive_scores));
  mem.set("fused_scratch_bytes", jv(fused_scratch));
  mem.set("threads", jv(static_cast<int64_t>(threads)));
  mem.set("tile", jv(integers({br, bc})));
  mem.set("lse_bytes", jv(lse_bytes));
  mem.set("qkv_bytes", jv(qkv_bytes));
  j.set("memory", jv(std::move(mem)));
  json::Value be = json::Value::object();
  be.set("backend", jv(backend));
  be.set("reason", jv(choice.reason));
  j.set("backend", jv(std::move(be)));
}

}  // namespace

json::Value heads_cost_note(Page& r, int64_t B, int64_t N, int64_t D, int64_t H, int64_t pairs) {
  const int64_t dk = D / H;
  const int64_t proj = mul({4, 2, B, N, D, D});  // W_Q, W_K, W_V, W_O: the same for both
  const int64_t core_multi = mul({2, 2, B, H, pairs, dk}), core_one = mul({2, 2, B, pairs, D});
  const int64_t soft_multi = mul({5, B, H, pairs}), soft_one = mul({5, B, pairs});
  const int64_t total_multi = add(add(proj, core_multi), soft_multi),
                total_one = add(add(proj, core_one), soft_one);
  const double ratio = static_cast<double>(total_multi) / static_cast<double>(total_one);
  auto rat = [](int64_t a, int64_t b) { return fmt(static_cast<double>(a) / static_cast<double>(b), 3); };
  const std::string sH = std::to_string(H);
  r.heading(r.t("The tutorial says \"multi-head attention costs h times one head\"",
                "教程说：“多头注意力的计算量是单头的 h 倍”"));
  r.para(r.t("With d_k = d_model / h it does not. Computed for these sizes (FLOPs; B = " + std::to_string(B) +
                 ", N = " + with_commas(N) + ", d_model = " + std::to_string(D) + ", h = " + sH + "):",
             "当 d_k = d_model / h 时并非如此。按这里的规模计算（FLOPs；B = " + std::to_string(B) +
                 "，N = " + with_commas(N) + "，d_model = " + std::to_string(D) + "，h = " + sH + "）："));
  text::Table t(
      {{"", text::Align::left},
       {r.t("h heads of d_k = ", "h 个头，d_k = ") + std::to_string(dk), text::Align::right},
       {r.t("1 head of d_model = ", "1 个头，宽度 d_model = ") + std::to_string(D), text::Align::right},
       {r.t("ratio", "倍数"), text::Align::right}});
  t.row({r.t("projections W_Q, W_K, W_V, W_O", "投影 W_Q、W_K、W_V、W_O"), with_commas(proj),
         with_commas(proj), "1.000"});
  t.row({r.t("scores and weighted sum", "分数与加权求和"), with_commas(core_multi), with_commas(core_one),
         rat(core_multi, core_one)});
  t.row({"softmax", with_commas(soft_multi), with_commas(soft_one), rat(soft_multi, soft_one)});
  t.row({r.t("total", "合计"), with_commas(total_multi), with_commas(total_one), fmt(ratio, 3)});
  r.table(t);
  r.para(
      r.t("The h heads together cost " + fmt(ratio, 3) + " times one head of width d_model, not " + sH +
              " times: each head's\ndot products are h times shorter (d_k = d_model / h). Only the softmax "
              "grows with h (h·N² scores\ninstead of N²), and a naive implementation stores h score matrices "
              "(the fused kernel stores none).",
          "h 个头加起来的计算量是一个宽度为 d_model 的单头的 " + fmt(ratio, 3) + " 倍，而不是 " + sH +
              " 倍：\n每个头的点积短了 h 倍（d_k = d_model / h）。随 h 增长的只有 softmax（h·N² 个分数，"
              "而不是 N² 个），\n以及朴素实现要存下 h 个分数矩阵（融合核一个也不存）。"));
  json::Value j = json::Value::object();
  put(j, {{"multi_head_flops", jv(total_multi)},
          {"one_head_flops", jv(total_one)},
          {"ratio", jv(ratio)},
          {"tutorial_claim_ratio", jv(H)}});
  return j;
}

json::Value swin_note(Page& r, int64_t N, int64_t M) {
  const int64_t M2 = mul(M, M);
  const double windows = static_cast<double>(N) / static_cast<double>(M2);
  // Query-key pairs per head; a sequence shorter than one window is one window.
  const int64_t global = mul(N, N), windowed = mul(N, std::min(N, M2));
  const std::string sM = std::to_string(M), sM2 = std::to_string(M2);
  r.heading(r.t("The tutorial says \"Swin windows make attention O(N)\"",
                "教程说：“Swin 的窗口让注意力变成 O(N)”"));
  r.para(
      r.t("True for a fixed window M. Swin cuts N tokens into N/M² windows of M x M = M² tokens and attends\n"
          "only inside each window: (N/M²)·(M²)² = N·M² query-key pairs, linear in N but quadratic in M,\n"
          "against N² for global attention. For N = " +
              with_commas(N) + " and Swin's M = " + sM + " (M² = " + sM2 + "):",
          "对固定的窗口大小 M 来说是对的。Swin 把 N 个词元切成 N/M² 个窗口，每个窗口 M x M = M² 个词元，\n"
          "只在窗口内部做注意力：(N/M²)·(M²)² = N·M² 个查询-键对，对 N 是线性的，对 M 却是平方的；\n"
          "全局注意力则是 N² 个。取 N = " +
              with_commas(N) + "、Swin 的 M = " + sM + "（M² = " + sM2 + "）："));
  text::Table t(
      {{"", text::Align::left}, {r.t("query-key pairs per head", "每个头的查询-键对"), text::Align::right}});
  t.row({r.t("global: N²", "全局：N²"), with_commas(global)});
  t.row({N <= M2 ? r.t("windows: one window of all N tokens", "窗口：一个窗口装下全部 N 个词元")
                 : r.t("windows: N/M² = ", "窗口：N/M² = ") + fmt(windows, 1) +
                       r.t(" windows of M²·M²", " 个窗口，各 M²·M²"),
         with_commas(windowed)});
  r.table(t);
  if (N <= M2) {
    r.para(r.t("Here N <= M²: the whole sequence fits in one window, so windows save nothing at this N.",
               "这里 N <= M²：整个序列放得进一个窗口，所以在这个 N 下窗口省不了任何计算。"));
  } else {
    r.para(r.t(
        "Global / windowed = N / M² = " +
            fmt(static_cast<double>(global) / static_cast<double>(windowed), 1) +
            ": the saving grows with N. Doubling N doubles the windowed cost and\nquadruples the global one; "
            "doubling M quadruples the windowed cost. A query sees only its own window\n(Swin shifts the "
            "windows every other layer so that information crosses them).",
        "全局 / 窗口 = N / M² = " + fmt(static_cast<double>(global) / static_cast<double>(windowed), 1) +
            "：N 越大省得越多。N 翻倍时，窗口注意力的计算量翻倍，\n全局注意力的计算量变为四倍；"
            "M 翻倍时，窗口注意力的计算量也变为四倍。每个查询只能看到自己的窗口\n（Swin "
            "每隔一层平移一次窗口，"
            "让信息能跨过窗口的边界）。"));
  }
  json::Value j = json::Value::object();
  put(j, {{"n", jv(N)}, {"window", jv(M)}, {"global_pairs", jv(global)}, {"windowed_pairs", jv(windowed)}});
  return j;
}

void cost(const CostOptions& p, Page& r) {
  const Cost c = compute_cost(p);
  c.steps_text(r);
  c.memory_text(r);
  json::Value heads = heads_cost_note(r, c.B, c.N, c.D, c.H, c.pairs);
  json::Value swin = swin_note(r, c.N, 7);
  c.to_json(r);
  r.json.set("tutorial_heads_cost", std::move(heads));
  r.json.set("tutorial_swin", std::move(swin));
}

}  // namespace attn::teach
