// `attn quiz`: a self-test on attention. The quiz, its texts, answers files
// and the JSON come from the library (attn/teach/quiz.h); this file reads the
// flags and, in the interactive mode, the answers from stdin.
//
// Modes: interactive (read answers from stdin, one per question; default),
// --answers FILE (the same, from a file, scriptable), --json (the quiz, and
// with --answers the results, as one JSON object), --print-answers (the key,
// in the format --answers reads).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/quiz.h>
#include <attn/teach/report.h>
#include <unistd.h>

#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

namespace quiz = teach::quiz;
using quiz::Question;
using quiz::Verdict;

constexpr int64_t kDefaultCount = 5;
constexpr int64_t kMaxCount = 1000;
constexpr int kMaxTries = 3;  // malformed answers in a row before a question counts as wrong

const std::vector<OptionSpec>& quiz_options() {
  static const std::vector<OptionSpec> specs = {
      {"count", "N", "number of questions, 1..1000 (default 5)", "题目数量，1..1000（默认 5）"},
      {"kind", "KIND",
       "numeric | structure | path | all (default all: the kinds take turns,\n"
       "so every 3 consecutive questions cover all three)",
       "numeric（数值）| structure（结构）| path（路径）| all（默认 all：各题型轮流出，\n"
       "所以每连续 3 道题覆盖全部三种）"},
      {"seed", "S",
       "make the quiz reproducible: the same seed gives the same questions and\n"
       "numbers (default: a random seed, printed so the quiz can be repeated)",
       "让测验可重复：同一个种子给出同样的题目和数字\n（默认：随机种子，会打印出来，方便重做同一份测验）"},
      {"answers", "FILE",
       "read the answers from FILE, one per line, instead of asking (blank lines\n"
       "and lines starting with # are skipped); prints each result",
       "从 FILE 读取答案，每行一个，不再逐题提问（跳过空行和以 # 开头的行）；\n打印每题的结果"},
      {"json", "",
       "print the quiz as one JSON object: questions, expected answers,\n"
       "solutions, and with --answers the results and score",
       "把测验打印成一个 JSON 对象：题目、正确答案、解答；\n配合 --answers 还有每题结果和得分"},
      {"print-answers", "", "print the answer key (in the format --answers reads) instead of asking",
       "打印答案（即 --answers 读取的格式），不提问"},
      {"lang", "zh|en",
       "the language of questions, feedback, solutions and this help (default:\n"
       "from LC_ALL / LC_MESSAGES / LANG, else English); answers are read in either",
       "题目、反馈、解答和本帮助的语言（默认：按 LC_ALL / LC_MESSAGES / "
       "LANG，\n否则英文）；两种语言的答案都能识别"},
      {"help", "", "this text", "显示本帮助"},
  };
  return specs;
}

std::string help_text(teach::Lang lang) {
  if (lang == teach::Lang::zh)
    return "用法：attn quiz [选项]\n\n"
           "关于注意力的自测，共三类题：\n"
           "  numeric（数值）   由给定分数求 softmax 权重、小向量的 q·k/√d_k，以及 √d_k 对 softmax "
           "饱和的作用\n"
           "  structure（结构） 因果掩码或窗口掩码让查询看到哪些位置、交叉注意力中 Q、K、V 来自哪里、\n"
           "                    多头注意力的参数量和 FLOPs、任务该用编码器 / 解码器 / "
           "两者、分类器从哪里读标签\n"
           "  path（路径）      RNN 与（窗口）自注意力中两个位置之间的步数（教程 1.2 节）\n"
           "每个正确答案都由 attn 引擎计算，或由与引擎核对过的算术得出。\n"
           "每答一题都会告诉你对错并给出详细解答；最后给出得分。\n\n"
           "作答：数字写小数（0.24，也可写全角 ０．２４ 或 24%）；位置从 0 数，写成列表或范围\n"
           "（0-2、0,1,2 或 0、1、2）；选择题写字母（a、b、c）或选项文字（中英文均可，如 仅编码器 / "
           "encoder）；\n"
           "输入 quit 结束。\n\n"
           "选项：\n" +
           format_options(quiz_options(), lang) +
           "\n示例：\n"
           "  attn quiz --lang zh\n"
           "  attn quiz --lang zh --kind numeric --count 3 --seed 7\n"
           "  attn quiz --seed 7 --print-answers > key.txt && attn quiz --seed 7 --answers key.txt\n"
           "  attn quiz --lang zh --seed 7 --answers mine.txt --json | python3 -m json.tool\n\n"
           "退出状态：测验正常进行时为 0（无论得分）；选项有误、答案文件无法读取或其中有无法识别的答案时为 "
           "1。\n"
           "更多：docs/quiz.md\n";
  return "usage: attn quiz [options]\n\n"
         "A self-test on attention with three kinds of questions:\n"
         "  numeric    softmax weights from given scores, q·k/√d_k of small vectors, and what\n"
         "             √d_k does to softmax saturation\n"
         "  structure  which positions a causal or window mask lets a query see, where Q, K, V come\n"
         "             from in cross-attention, parameters and FLOPs of multi-head attention,\n"
         "             encoder / decoder / both for a task, where a classifier reads its label\n"
         "  path       steps between two positions in an RNN against (windowed) self-attention\n"
         "Every expected answer is computed by the attn engine or by arithmetic checked against it.\n"
         "After each answer you see whether it was right and a worked solution; at the end, the score.\n\n"
         "Answers: numbers as decimals (0.24); positions counted from 0 as a list or range (0-2 or\n"
         "0,1,2); multiple choice as a letter (a, b, c) or the choice's text; 'quit' stops.\n\n"
         "Options:\n" +
         format_options(quiz_options(), lang) +
         "\nExamples:\n"
         "  attn quiz\n"
         "  attn quiz --kind numeric --count 3 --seed 7\n"
         "  attn quiz --seed 7 --print-answers > key.txt && attn quiz --seed 7 --answers key.txt\n"
         "  attn quiz --seed 7 --answers mine.txt --json | python3 -m json.tool\n"
         "  attn quiz --lang zh    (the quiz in Chinese; answers such as 仅编码器 or ０．７６ are read "
         "too)\n\n"
         "Exit status 0 when the quiz ran (whatever the score); 1 for bad options, an unreadable\n"
         "answers file or a malformed answer in it. More: docs/quiz.md\n";
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// One question asked on stdin, up to kMaxTries readable answers. Returns false at end
// of input or 'quit'; adds to `answered` and `right`.
bool ask(const teach::Quiz& quiz, std::size_t i, bool echo, int64_t& answered, int64_t& right) {
  const Question& q = quiz.questions[i];
  const bool zh = quiz.options.lang == teach::Lang::zh;
  std::cout << teach::question_text(quiz, i);
  for (int tries = 1; tries <= kMaxTries; ++tries) {
    std::cout << (zh ? "答案> " : "answer> ") << std::flush;
    std::string line;
    if (!io::read_line(std::cin, line, "standard input")) return false;
    if (echo) std::cout << line << "\n";  // piped input: show it, so the transcript reads well
    if (trim(line) == "quit" || trim(line) == "退出") return false;
    const Verdict v = quiz::check(q, line);
    if (v.valid) {
      ++answered;
      right += v.correct;
      std::cout << teach::result_text(q, v.correct) << teach::solution_text(q);
      return true;
    }
    std::cout << (zh ? "无法识别这个答案：" : "could not read that: ") << v.error << "\n";
    if (tries < kMaxTries) {
      if (zh)
        std::cout << "请再试一次（还剩 " << kMaxTries - tries << " 次）。\n";
      else
        std::cout << "Try again (" << kMaxTries - tries << (kMaxTries - tries == 1 ? " try" : " tries")
                  << " left).\n";
    }
  }
  if (zh)
    std::cout << "试了 " << kMaxTries << " 次都没有有效答案，按答错计。\n";
  else
    std::cout << "No valid answer after " << kMaxTries << " tries; counted as wrong.\n";
  std::cout << teach::result_text(q, false) << teach::solution_text(q);
  ++answered;
  return true;
}

// The interactive quiz: one answer per question from stdin.
void interactive(const teach::Quiz& quiz) {
  std::cout << teach::quiz_intro(quiz);
  const bool echo = isatty(STDIN_FILENO) == 0;  // a terminal echoes what is typed
  int64_t right = 0, answered = 0;
  bool stopped = false;
  for (std::size_t i = 0; i < quiz.questions.size() && !stopped; ++i)
    stopped = !ask(quiz, i, echo, answered, right);
  if (stopped) {
    if (quiz.options.lang == teach::Lang::zh)
      std::cout << "\n（共 " << quiz.questions.size() << " 题，答了 " << answered << " 题后停止）\n";
    else
      std::cout << "\n(stopped after " << answered << " of " << quiz.questions.size() << " questions)\n";
  }
  std::cout << teach::score_text(right, answered, quiz.options.lang);
}

}  // namespace

int run_quiz(const std::vector<std::string>& argv) {
  const Args args(argv, quiz_options());
  const teach::Lang lang = args.has("lang") ? teach::parse_lang(args.str("lang")) : teach::default_lang();
  if (args.has("help")) {
    std::cout << help_text(lang);
    return 0;
  }
  ATTN_CHECK(!(args.has("print-answers") && args.has("answers")),
             "--print-answers and --answers do not go together: print the key, or check answers");
  ATTN_CHECK(!(args.has("print-answers") && args.has("json")),
             "--print-answers and --json do not go together: the JSON already holds the expected answers");
  teach::QuizOptions o;
  o.lang = lang;
  o.count = args.has("count") ? args.integer("count", 1, kMaxCount) : kDefaultCount;
  o.kind = args.has("kind") ? args.str("kind") : "all";
  quiz::parse_kind(o.kind);  // a bad kind fails before the answers file is read
  if (args.has("seed")) {
    o.seed = static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<int64_t>::max()));
  } else {
    std::random_device rd;
    o.seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & 0x7fffffffffffffffull;
  }
  // Read the answers before generating, so that a bad file fails fast.
  std::vector<teach::AnswerLine> answers;
  if (args.has("answers")) answers = teach::read_answers(args.str("answers"));
  const teach::Quiz quiz = teach::make_quiz(o);
  if (args.has("print-answers")) {
    std::cout << teach::answer_key(quiz);
    return 0;
  }
  // Check every answer of the file first: a malformed one is an error before any output.
  std::vector<Verdict> verdicts;
  if (args.has("answers")) verdicts = teach::check_answers(quiz, answers, args.str("answers"));
  if (args.has("json")) {
    std::cout << teach::json_text(teach::quiz_json(quiz, answers, verdicts)) << "\n";
  } else if (args.has("answers")) {
    std::cout << teach::answers_transcript(quiz, answers, verdicts);
  } else {
    interactive(quiz);
  }
  return 0;
}

}  // namespace attn::cli
