// `attn view`: shows attention weights. Writes a self-contained HTML page
// (head, model, matrix and cross-attention views, drawn on <canvas> by the
// embedded script of src/viz/page.html) or prints a heatmap to the terminal;
// both are library code (include/attn/viz/view.h). The export format is
// described in docs/viewer.md.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/explain.h>
#include <attn/teach/lang.h>
#include <attn/text/segment.h>
#include <attn/viz/view.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& view_options() {
  static const std::vector<OptionSpec> specs = {
      {"output", "FILE", "write the HTML page to FILE (also -o FILE); written atomically",
       "把 HTML 页面写到 FILE（也可写 -o FILE）；原子写入"},
      {"demo", "", "instead of an export: the attn explain sentence, 2 layers x 4 heads, computed now",
       "不读导出文件：用 attn explain 的例句，2 层 × 4 个头，现场计算"},
      {"demo-translation", "",
       "instead of an export: an encoder-decoder demo (encoder, decoder and\ncross-attention), computed now",
       "不读导出文件：编码器-解码器演示（编码器、解码器和交叉注意力），现场计算"},
      {"sentence", "TEXT",
       "with --demo: another sentence, its embeddings seeded as in attn explain;\nChinese without spaces is "
       "segmented (jieba dictionary, else by character)",
       "与 --demo 一起用：换一个句子，词向量像 attn explain 一样由种子生成；没有空格的中文会被切分\n（有 "
       "jieba "
       "词典时按词，否则按字）"},
      {"save-export", "FILE", "also write the (validated) export as JSON to FILE",
       "同时把（已校验的）导出以 JSON 写到 FILE"},
      {"terminal", "", "print a heatmap of one layer and head to the terminal instead of a page",
       "不写页面，在终端打印某一层某个头的热力图"},
      {"layer", "L", "with --terminal: the layer, from 0 (default 0)",
       "与 --terminal 一起用：层，从 0 开始（默认 0）"},
      {"head", "H", "with --terminal: the head, from 0 (default 0)",
       "与 --terminal 一起用：头，从 0 开始（默认 0）"},
      {"set", "KEY",
       "with --terminal: attention, encoder_attention, decoder_attention or\ncross_attention (default: the "
       "first "
       "present)",
       "与 --terminal 一起用：attention、encoder_attention、decoder_attention "
       "或\ncross_attention（默认：第一个存在的）"},
      {"lang", "zh|en", "the page's first language (it has a switch); default from LC_ALL / LANG,\nelse en",
       "页面的初始语言（页面里可以切换）；默认随 LC_ALL / LANG，否则英文"},
      {"help", "", "this text", "本说明"},
  };
  return specs;
}

std::string help_text(teach::Lang lang) {
  if (lang == teach::Lang::zh)
    return "用法：attn view EXPORT.json -o page.html [--lang zh|en]\n"
           "      attn view --demo -o page.html\n"
           "      attn view EXPORT.json --terminal [--layer L] [--head H] [--set KEY]\n\n"
           "显示注意力权重。页面是一个独立的 HTML 文件（不联网）：头视图（词元之间的连线）、模型视图\n"
           "（所有层 × 头）、矩阵视图（热力图，长输入分段显示），编码器-解码器导出还有交叉注意力（对齐）\n"
           "视图；都可导出 PNG 和 SVG。图例说明线的粗细和颜色、格子的深浅各表示什么；界面可在中文和英文\n"
           "之间切换；没有中文字体时页面会给出提示，并把汉字显示为码位（U+5C0F）而不是方框。导出文件会\n"
           "先校验（形状与词元数一致、没有 NaN 或负权重、每行之和在 0.001 内为 1，或整行被屏蔽时为 0）；\n"
           "见 docs/viewer.md。\n\n"
           "选项：\n" +
           format_options(view_options(), lang) +
           "\n例子：\n"
           "  attn view --demo -o demo.html --lang zh\n"
           "  attn view --demo --sentence 小明今天没来学校，因为他生病了 -o demo.html\n"
           "  attn view export.json -o page.html\n"
           "  attn view export.json --terminal --layer 1 --head 3\n";
  return "usage: attn view EXPORT.json -o page.html [--lang zh|en]\n"
         "       attn view --demo -o page.html\n"
         "       attn view EXPORT.json --terminal [--layer L] [--head H] [--set KEY]\n\n"
         "Shows attention weights. The page is one self-contained HTML file (no network):\n"
         "a head view (lines between tokens), a model view (every layer x head), a matrix\n"
         "view (heatmap, windowed for long inputs) and, for encoder-decoder exports, a\n"
         "cross-attention (alignment) view; each exports PNG and SVG. A legend says what a\n"
         "line's thickness and colour mean; the page switches between English and Chinese\n"
         "and, without a CJK font, says so and shows code points (U+5C0F) instead of boxes. The export is\n"
         "validated first (shapes against token counts, no NaN or negative weights, rows\n"
         "summing to 1 within 0.001 or to 0 for fully masked rows); see docs/viewer.md.\n\n"
         "Options:\n" +
         format_options(view_options(), lang) +
         "\nExamples:\n"
         "  attn view --demo -o demo.html\n"
         "  attn view --demo --sentence 小明今天没来学校，因为他生病了 -o demo.html\n"
         "  attn view --demo-translation -o translation.html\n"
         "  attn view export.json -o page.html\n"
         "  attn view export.json --terminal --layer 1 --head 3\n";
}

// The worked example of `attn explain` (or of another sentence) as the demos' input.
viz::DemoExample demo_example(const teach::Sentence& sentence = {}, const std::string& text = "") {
  const teach::Example ex = teach::example_of(sentence);
  return {ex.words, text.empty() ? ex.gloss : text, ex.d_model(), ex.X.v, ex.WQ.v, ex.WK.v, ex.WV.v, ex.WO.v};
}

// --sentence: split as attn explain splits it; says how when it had no spaces.
viz::DemoExample sentence_demo(const std::string& text, teach::Lang lang) {
  const text::SentenceSplit split = text::segment_sentence(text);
  ATTN_CHECK(!split.words.empty(), "--sentence: expected at least one word; got '", text, "'");
  if (split.method != text::SplitMethod::spaces) {
    std::string words;
    for (const auto& w : split.words) words += (words.empty() ? "" : " ") + w;
    const bool zh = lang == teach::Lang::zh;
    std::printf("%s%s%s%s\n", zh ? "句子没有空格，" : "The sentence has no spaces: ",
                text::split_method_label(split.method, zh), zh ? "：" : ": ", words.c_str());
  }
  teach::Sentence s;
  s.words = split.words;
  return demo_example(s, text);
}

// The example as the encoder's input and its translation, embedded by explain's
// seeded word generator, as the decoder's.
viz::DemoTranslation demo_translation_input() {
  viz::DemoTranslation t;
  t.source = demo_example();
  for (const std::string& w : t.target) {
    const std::vector<double> e = teach::generated_embedding(w, teach::kDefaultSeed, t.source.d_model);
    t.target_x.insert(t.target_x.end(), e.begin(), e.end());
  }
  return t;
}

}  // namespace

int run_view(const std::vector<std::string>& raw) {
  // One positional argument (the export) and -o are taken out before the
  // strict option parser sees the rest.
  std::vector<std::string> args;
  std::string input;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "-o") {
      ATTN_CHECK(i + 1 < raw.size(), "option -o needs a value (FILE); got nothing after it");
      args.push_back("--output");
      args.push_back(raw[++i]);
    } else if (!a.empty() && a[0] != '-') {
      ATTN_CHECK(input.empty(), "expected one export file; got '", input, "' and '", a, "'");
      input = a;
    } else {
      args.push_back(a);
      // Keep an option's value out of the positional check.
      if (a.size() > 2 && a.find('=') == std::string::npos)
        for (const auto& o : view_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) args.push_back(raw[++i]);
    }
  }
  const Args opts(args, view_options());
  const teach::Lang lang = opts.has("lang") ? teach::parse_lang(opts.str("lang")) : teach::default_lang();
  if (opts.has("help")) {
    std::fputs(help_text(lang).c_str(), stdout);
    return 0;
  }
  const int sources = !input.empty() + opts.has("demo") + opts.has("demo-translation");
  ATTN_CHECK(sources == 1, "expected exactly one source: an export file, --demo or --demo-translation; got ",
             sources);
  const bool terminal = opts.has("terminal");
  ATTN_CHECK(terminal != opts.has("output"),
             terminal ? "--terminal prints to the terminal; -o/--output is not used"
                      : "expected -o FILE (the page to write) or --terminal");
  if (!terminal)
    for (const char* o : {"layer", "head", "set"})
      ATTN_CHECK(!opts.has(o), "--", o, " is only used with --terminal");

  ATTN_CHECK(!opts.has("sentence") || opts.has("demo"), "--sentence goes with --demo");
  const viz::Export e =
      opts.has("demo")
          ? viz::demo_self_attention(opts.has("sentence") ? sentence_demo(opts.str("sentence"), lang)
                                                          : demo_example())
      : opts.has("demo-translation") ? viz::demo_translation(demo_translation_input())
                                     : viz::parse_export(io::read_file(input, "export"));
  if (opts.has("save-export")) viz::save_export(opts.str("save-export"), e);
  if (terminal) {
    viz::TerminalOptions t;
    if (opts.has("set")) t.set = opts.str("set");
    if (opts.has("layer")) t.layer = opts.integer("layer", 0, 1 << 20);
    if (opts.has("head")) t.head = opts.integer("head", 0, 1 << 20);
    std::fputs(viz::terminal_heatmap(e, t).c_str(), stdout);
    return 0;
  }
  viz::PageOptions po;
  po.lang = teach::lang_name(lang);
  const std::string page = viz::page_html(e, po);
  io::write_file_atomically(opts.str("output"), page);
  std::printf("wrote %s (%zu bytes)\n", opts.str("output").c_str(), page.size());
  return 0;
}

}  // namespace attn::cli
