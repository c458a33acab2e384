// `attn explain`: the tutorial's worked example of self-attention, computed
// step by step by plain arithmetic and checked against the engine.
//
// Modes (at most one): the default walkthrough, --scores, --multi-head,
// --cost, --mask, --model. Each is one library call (attn/teach/explain.h)
// that returns a Report: text for people, JSON for programs.
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/teach/explain.h>
#include <attn/text/segment.h>  // issue 17 (zh-view): Chinese typed without spaces

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& explain_options() {
  static const std::vector<OptionSpec> specs = {
      {"query", "WORD|POS",
       "the query word of the walkthrough / --multi-head: a word of the sentence\n"
       "or its position (from 0; default: 没, position 4)",
       "逐步演示 / --multi-head 的查询词：句中的一个词，或它的位置\n"
       "（从 0 开始数；默认：没，位置 4）"},
      {"sentence", "\"W1 W2 ...\"",
       "use another sentence, tokens separated by spaces; its embeddings come\n"
       "from a deterministic seeded generator (see --seed and docs/explain.md)",
       "换一个句子，词元之间用空格分开；它的嵌入来自一个确定性的\n"
       "带种子生成器（见 --seed 和 docs/explain.md）"},
      {"seed", "S", "seed of the embedding generator for --sentence (default 2017)",
       "--sentence 所用嵌入生成器的种子（默认 2017）"},
      {"scores", "S1,S2,...",
       "explain softmax of these scores: exp, sum, divide, which wins\n"
       "(e.g. --scores 0.2,2.5,0.8,0.3,0.4,2.0)",
       "讲解这些分数的 softmax：取指数、求和、相除、谁胜出\n"
       "（例如 --scores 0.2,2.5,0.8,0.3,0.4,2.0）"},
      {"tokens", "A,B,...", "with --scores: names of the positions (one per score)",
       "配合 --scores：各位置的名字（每个分数一个）"},
      {"multi-head", "",
       "split Q, K, V into heads: each head's weights for the query word side by\n"
       "side, the concatenation and the W_O projection, with shapes",
       "把 Q、K、V 切分成多个头：并排列出每个头对查询词的权重，\n"
       "再拼接并经 W_O 投影，每一步都给出形状"},
      {"heads", "H",
       "with --multi-head: number of heads, dividing d_model = 8 (default 2);\nwith --cost: number of heads, "
       "dividing --d",
       "配合 --multi-head：头数，须整除 d_model = 8（默认 2）；\n配合 --cost：头数，须整除 --d"},
      {"cost", "",
       "shapes, FLOPs and memory of every step for the sizes --n, --d, --heads\n"
       "[--batch] [--causal]; naive O(N²) memory against the fused kernel; the\n"
       "backend attn chooses and why",
       "按 --n、--d、--heads [--batch] [--causal] 给出的规模，列出每一步的\n"
       "形状、FLOPs 和内存；朴素实现的 O(N²) 内存与融合核对比；\n"
       "以及 attn 选择哪个后端、为什么"},
      {"n", "N", "with --cost: sequence length N (>= 1)", "配合 --cost：序列长度 N（>= 1）"},
      {"d", "D", "with --cost: model width d_model (>= 1); d_k = D / heads",
       "配合 --cost：模型宽度 d_model（>= 1）；d_k = D / 头数"},
      {"batch", "B", "with --cost: batch size (default 1)", "配合 --cost：批大小（默认 1）"},
      {"causal", "", "with --cost: causal attention; with --mask window: look back only",
       "配合 --cost：因果注意力；配合 --mask window：只看自己和之前的位置"},
      {"mask", "KIND",
       "causal | padding | window: which positions each query may see, as a\n"
       "grid over the sentence, computed by the engine",
       "causal | padding | window：每个查询能看到哪些位置，\n"
       "以句子上的网格表示，由引擎计算"},
      {"length", "L", "with --mask padding: the number of real tokens (0..N); the rest is padding",
       "配合 --mask padding：真实词元的个数（0..N），其余为填充"},
      {"window", "W", "with --mask window: each query sees keys at most W positions away",
       "配合 --mask window：每个查询只看距离不超过 W 个位置的键"},
      {"model", "FILE",
       "a trained classifier (attn train classify): the walkthrough with its real\n"
       "Q, K, V for the sentence given as an argument (or --sentence, as is);\n"
       "with --cost: gemma3 (or a Gemma 3 .gguf): windowed vs global attention FLOPs and KV\n"
       "memory in its real shapes, N up to --n (default 32768)",
       "一个训练好的分类器（attn train classify）：用它真实的 Q、K、V，\n"
       "对作为参数给出的句子（或 --sentence，原样使用）做逐步演示；\n"
       "配合 --cost：gemma3（或一个 Gemma 3 .gguf 文件）：按它的真实形状比较窗口注意力\n"
       "与全局注意力的 FLOPs 和 KV 缓存，N 最大到 --n（默认 32768）"},
      {"layer", "L", "with --model: the encoder layer, from 0 (default: the last)",
       "配合 --model：编码器的层，从 0 开始（默认：最后一层）"},
      {"head", "H", "with --model: the head, from 0 (default 0)", "配合 --model：头，从 0 开始（默认 0）"},
      {"word", "W",
       "with --model: the query: a token of the sentence or its position (from 0,\n[CLS] = 0; "
       "default [CLS], what the classifier reads)",
       "配合 --model：查询，即句中的一个词元或它的位置（从 0 开始，\n[CLS] = 0；"
       "默认 [CLS]，也就是分类器读取的那个）"},
      {"dims", "N", "with --model: dimensions shown in the Q/K/V table (default 4)",
       "配合 --model：Q/K/V 表中显示的维数（默认 4）"},
      {"lang", "zh|en",
       "the language of the text and of this help (default: from LC_ALL /\nLC_MESSAGES / LANG, else en); the "
       "numbers are the same in both",
       "输出文字和本帮助的语言（默认：取自 LC_ALL / LC_MESSAGES / LANG，\n否则为 "
       "en）；两种语言中的数字完全相同"},
      {"json", "", "print the same content as one JSON object (for programs)",
       "把同样的内容输出为一个 JSON 对象（供程序读取）"},
      {"help", "", "this text", "显示本帮助"},
  };
  return specs;
}

// The examples of --help; the Chinese help uses the tutorial's own sentence where the English one uses an
// English sentence.
std::string examples(teach::Lang lang) {
  return std::string(
             "  attn explain\n"
             "  attn explain --query 带\n") +
         (lang == teach::Lang::zh
              ? "  attn explain --sentence \"小明 今天 没 来 学校 ， 因为 他 生病 了\" --query 他\n"
                "  attn explain --sentence 小明今天没来学校，因为他生病了 --query 他   "
                "（不加空格：自动切分）\n"
              : "  attn explain --sentence \"the cat sat on the mat\" --query cat\n"
                "  attn explain --sentence 小明今天没来学校，因为他生病了 --query 他   (no spaces: "
                "segmented)\n") +
         "  attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0 --tokens a,b,c,d,e,f\n"
         "  attn explain --multi-head --heads 4\n"
         "  attn explain --cost --n 4096 --d 1024 --heads 16 --batch 8 --causal\n"
         "  attn explain --mask causal\n"
         "  attn explain --mask padding --length 5\n"
         "  attn explain --mask window --window 1\n"
         "  attn explain --lang zh\n"
         "  attn explain --json | python3 -m json.tool\n"
         "  attn explain --model runs/classify/model.attn \"质量很好\" --layer 1 --head 2 --word 好\n";
}

std::string help_text(teach::Lang lang) {
  const std::string usage =
      lang == teach::Lang::zh
          ? "用法：attn explain [选项]\n"
            "      attn explain --model FILE \"句子\" [--layer L] [--head H] [--word W] [--json]\n\n"
          : "usage: attn explain [options]\n"
            "       attn explain --model FILE \"sentence\" [--layer L] [--head H] [--word W] [--json]\n\n";
  if (lang == teach::Lang::zh)
    return usage +
           "在句子 今天 下雨 ， 我 没 带 伞 上一步步演示 Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V：\n"
           "对查询词 没，依次打印嵌入与投影、分数 q·k_j、除以 √d_k、取指数、归一化后的权重、\n"
           "值向量的加权和，以及各个词的排名；然后用 attn 引擎在同样的数上再算一遍，确认结果一致。\n"
           "输入只是示意（手工选定，不是学出来的）；其后的每个数都是计算出来的。\n\n"
           "模式（至多选一个；不选 = 逐步演示）：\n"
           "  --scores, --multi-head, --cost, --mask, --model（训练好的分类器的真实 Q、K、V）\n"
           "  --attends（在真实的预训练模型里，他 关注什么；详见 attn explain --attends --help）\n"
           "  --stages（真实模型里你的句子的每一步；详见 attn explain --stages --help）\n\n"
           "选项：\n" +
           format_options(explain_options(), lang) + "\n示例：\n" + examples(lang) +
           "\n层、头和位置都从 0 开始编号（--layer 0 是第一层，--query 0 是第一个词）。\n"
           "出错时（未知选项、数字格式不对、查询词不在句中、规模 <= 0、头数不能整除 d_model）\n"
           "以状态码 1 退出。\n"
           "详见：docs/explain.md\n";
  return usage +
         "Walks through Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V on the sentence\n"
         "今天 下雨 ， 我 没 带 伞 (\"it rained today, I didn't bring an umbrella\"): for the query\n"
         "word 没 it prints the embeddings and projections, the scores q·k_j, the division by √d_k,\n"
         "exp, the normalised weights, the weighted sum of the values, and a ranking of the words;\n"
         "then runs the attn engine on the same numbers and confirms that it agrees. The inputs are\n"
         "illustrative (hand-chosen, not learned); everything after them is computed.\n\n"
         "Modes (at most one; none = the walkthrough):\n"
         "  --scores, --multi-head, --cost, --mask, --model (a trained classifier's real Q, K, V)\n"
         "  --attends (what 他 attends to in a real pretrained model; attn explain --attends --help)\n"
         "  --stages (every stage on your own sentence in a real model; attn explain --stages --help)\n\n"
         "Options:\n" +
         format_options(explain_options(), lang) + "\nExamples:\n" + examples(lang) +
         "\nLayers, heads and positions are numbered from 0 (--layer 0 is the first layer, --query 0\n"
         "the first word). Errors (unknown option, malformed number, query word not\n"
         "in the sentence, sizes <= 0, heads not dividing d_model) exit with status 1.\n"
         "More: docs/explain.md\n";
}

// Which options each mode accepts (besides --json and --help).
struct Mode {
  const char* flag;  // the option that selects it; "" for the walkthrough
  const char* name;
  std::vector<std::string> accepts;
};

const std::vector<Mode>& modes() {
  static const std::vector<Mode> list = {
      {"", "the walkthrough", {"query", "sentence", "seed"}},
      {"scores", "--scores", {"tokens"}},
      {"multi-head", "--multi-head", {"heads", "query", "sentence", "seed"}},
      {"cost", "--cost", {"n", "d", "heads", "batch", "causal"}},
      {"mask", "--mask", {"length", "window", "causal", "sentence", "seed"}},
      {"model", "--model", {"layer", "head", "word", "dims", "sentence"}},
  };
  return list;
}

// Splits the arguments: with --model the sentence may be a positional argument,
// taken out before the strict parser.
void split_positional(const std::vector<std::string>& raw, std::vector<std::string>& argv,
                      std::vector<std::string>& positional) {
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a.rfind("--", 0) == 0) {
      argv.push_back(a);
      if (a.find('=') == std::string::npos)
        for (const auto& o : explain_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) argv.push_back(raw[++i]);
    } else {
      positional.push_back(a);
    }
  }
}

// The mode the options select; rejects options that do not belong to it.
const Mode& pick_mode(const Args& args) {
  const Mode* mode = &modes()[0];
  for (const auto& m : modes())
    if (*m.flag && args.has(m.flag)) {
      ATTN_CHECK(mode == &modes()[0], "choose one mode; got both ", mode->name, " and ", m.name);
      mode = &m;
    }
  for (const auto& name : args.given()) {
    if (name == "json" || name == "lang" || name == mode->flag) continue;
    bool ok = false;
    for (const auto& a : mode->accepts) ok = ok || a == name;
    if (ok) continue;
    std::string where;
    for (const auto& m : modes())
      for (const auto& a : m.accepts)
        if (a == name) where += std::string(where.empty() ? "" : " or ") + m.name;
    ATTN_CHECK(false, "option --", name, " does not apply to ", mode->name, "; it goes with ", where);
  }
  return *mode;
}

// ---- issue 17 (zh-view): how --sentence was split, said in the output ----
text::SentenceSplit& sentence_split() {
  static text::SentenceSplit split;  // method spaces: nothing to say
  return split;
}

void note_split(const Args& args, teach::Report& report) {
  const text::SentenceSplit& s = sentence_split();
  if (s.method == text::SplitMethod::spaces) return;
  const bool zh =
      (args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::default_lang()) == teach::Lang::zh;
  std::string words;
  for (const auto& w : s.words) words += (words.empty() ? "" : " ") + w;
  report.text = std::string(zh ? "句子没有空格，" : "The sentence has no spaces: ") +
                text::split_method_label(s.method, zh) + (zh ? "：" : ": ") + words + "\n\n" + report.text;
  json::Value j = json::Value::object();
  j.set("method", json::Value::string(text::split_method_name(s.method)));
  if (!s.dictionary.empty()) j.set("dictionary", json::Value::string(s.dictionary));
  json::Value list = json::Value::array();
  for (const auto& w : s.words) list.push_back(json::Value::string(w));
  j.set("words", std::move(list));
  report.json.set("segmentation", std::move(j));
}
// ---- end issue 17 (zh-view)

teach::Sentence sentence_of(const Args& args) {
  ATTN_CHECK(!args.has("seed") || (args.has("sentence") && !args.has("model")),
             "--seed only applies with --sentence (the default sentence's embeddings are hand-chosen)");
  teach::Sentence s;
  if (!args.has("sentence")) return s;
  // ---- issue 17 (zh-view): a sentence without spaces that holds CJK is segmented ----
  const std::string& text = args.str("sentence");
  if (text.find(' ') == std::string::npos && text::has_cjk(text)) {
    sentence_split() = text::segment_sentence(text);
    s.words = sentence_split().words;
  } else {
    s.words = args.words("sentence", ' ');
  }
  // ---- end issue 17 (zh-view)
  if (args.has("seed"))
    s.seed = static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<int64_t>::max()));
  return s;
}

// --lang, else the locale's language (LC_ALL / LC_MESSAGES / LANG).
teach::Lang lang_of(const Args& args) {
  return args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::default_lang();
}

std::string query_of(const Args& args) { return args.has("query") ? args.str("query") : ""; }

teach::Report scores_mode(const Args& args) {
  teach::ScoresOptions o;
  o.lang = lang_of(args);
  o.scores = args.numbers("scores");
  ATTN_CHECK(o.scores.size() <= 1000, "--scores: expected at most 1000 numbers; got ", o.scores.size());
  if (args.has("tokens")) {
    o.tokens = args.words("tokens", ',');
    ATTN_CHECK(o.tokens.size() == o.scores.size(), "--tokens: expected ", o.scores.size(),
               " names (one per score); got ", o.tokens.size(), " in '", args.str("tokens"), "'");
  }
  return teach::softmax_scores(o);
}

teach::Report gemma3_cost_mode(const Args& args) {
  for (const auto& name : args.given())
    ATTN_CHECK(name == "cost" || name == "model" || name == "n" || name == "json" || name == "lang",
               "option --", name,
               " does not apply to --cost --model (it takes --n, the longest sequence, default 32768)");
  teach::ModelCostOptions o;
  o.lang = lang_of(args);
  const std::string m = args.str("model");
  o.gguf = (m == "gemma3" || m == "gemma-3-270m") ? io::require_gemma3_gguf() : m;
  if (args.has("n")) o.max_n = args.integer("n", 1, int64_t{1} << 40);
  return teach::gemma3_cost(o);
}

teach::Report cost_mode(const Args& args) {
  teach::CostOptions o;
  o.lang = lang_of(args);
  for (const char* need : {"n", "d", "heads"})
    ATTN_CHECK(args.has(need), "--cost needs --n N --d D --heads H; --", need, " was not given");
  o.n = args.integer("n", 1, 1'000'000'000);
  o.d = args.integer("d", 1, 1'000'000);
  o.heads = args.integer("heads", 1, o.d);
  o.batch = args.has("batch") ? args.integer("batch", 1, 1'000'000) : 1;
  o.causal = args.has("causal");
  return teach::cost(o);
}

teach::Report mask_mode(const Args& args) {
  teach::MaskOptions o;
  o.lang = lang_of(args);
  o.sentence = sentence_of(args);
  o.kind = args.str("mask");
  if (args.has("length"))
    o.length = args.integer(
        "length", 0,
        o.kind == "padding" ? teach::example_of(o.sentence).n() : std::numeric_limits<int64_t>::max());
  if (args.has("window")) o.window = args.integer("window", 0, 1'000'000);
  o.causal = args.has("causal");
  return teach::mask(o);
}

teach::Report model_mode(const Args& args, const std::vector<std::string>& positional) {
  ATTN_CHECK(positional.size() + args.has("sentence") == 1,
             "--model needs one sentence (an argument or --sentence TEXT); got ",
             positional.size() + args.has("sentence"));
  teach::ModelOptions o;
  o.lang = lang_of(args);
  o.path = args.str("model");
  o.sentence = args.has("sentence") ? args.str("sentence") : positional[0];
  // The ranges of --layer and --head depend on the model: the library checks them.
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (args.has("layer")) o.layer = args.integer("layer", lo, hi);
  if (args.has("head")) o.head = args.integer("head", lo, hi);
  if (args.has("word")) o.word = args.str("word");
  if (args.has("dims")) o.show_dims = args.integer("dims", 1, 4096);
  return teach::explain_model(o);
}

teach::Report run_mode(const Mode& mode, const Args& args, const std::vector<std::string>& positional) {
  const std::string flag = mode.flag;
  if (flag == "scores") return scores_mode(args);
  if (flag == "cost") return cost_mode(args);
  if (flag == "mask") return mask_mode(args);
  if (flag == "model") return model_mode(args, positional);
  if (flag == "multi-head") {
    teach::MultiHeadOptions o;
    o.lang = lang_of(args);
    o.sentence = sentence_of(args);
    o.query = query_of(args);
    if (args.has("heads")) o.heads = args.integer("heads", 1, teach::kExampleDModel);
    return teach::multi_head(o);
  }
  teach::WalkthroughOptions o;
  o.lang = lang_of(args);
  o.sentence = sentence_of(args);
  o.query = query_of(args);
  return teach::walkthrough(o);
}

}  // namespace

// ---- issue 17 (zh-view): --attends, its own options (tools/cli/explain_attends.cc) ----
int run_explain_attends(const std::vector<std::string>& raw);
// ---- end issue 17 (zh-view)
// issue 41: --stages, the explainer's stages of a real model (tools/cli/explain_stages.cc)
int run_explain_stages(const std::vector<std::string>& raw);

int run_explain(const std::vector<std::string>& raw) {
  for (const std::string& a : raw)  // issue 17 (zh-view)
    if (a == "--attends") return run_explain_attends(raw);
  for (const std::string& a : raw)  // issue 41
    if (a == "--stages") return run_explain_stages(raw);
  std::vector<std::string> argv, positional;
  split_positional(raw, argv, positional);
  const Args args(argv, explain_options());
  ATTN_CHECK(positional.empty() || args.has("model"), "unexpected argument '",
             positional.empty() ? "" : positional[0],
             "'; a sentence as an argument goes with --model FILE (else use --sentence \"W1 W2 ...\")");
  if (args.has("help")) {
    std::fputs(help_text(lang_of(args)).c_str(), stdout);
    return 0;
  }
  // --cost --model gemma3|FILE.gguf: windowed vs global attention in Gemma 3's real shapes.
  const bool gemma_cost = args.has("cost") && args.has("model");
  teach::Report report = gemma_cost ? gemma3_cost_mode(args) : run_mode(pick_mode(args), args, positional);
  note_split(args, report);  // issue 17 (zh-view)
  if (args.has("json")) {
    std::fputs((teach::json_text(report.json) + "\n").c_str(), stdout);
  } else {
    std::fputs(report.text.c_str(), stdout);
  }
  return 0;
}

}  // namespace attn::cli
