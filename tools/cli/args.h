// Command-line options for subcommands: `--name value`, `--name=value` and
// flags. Everything is checked strictly; every problem throws attn::Error
// naming the option, what was expected and what was given.
#pragma once

#include <attn/teach/lang.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace attn::cli {

struct OptionSpec {
  OptionSpec(std::string name_, std::string metavar_, std::string help_, std::string help_zh_ = {})
      : name(std::move(name_)),
        metavar(std::move(metavar_)),
        help(std::move(help_)),
        help_zh(std::move(help_zh_)) {}

  std::string name;     // without the leading "--"
  std::string metavar;  // empty: a flag that takes no value
  std::string help;
  std::string help_zh;  // the same in Chinese (`--lang zh`); empty: the English text
};

class Args {
 public:
  // Parses `args` against `specs`. Unknown options, positional arguments,
  // missing values, values given to flags and repeated options throw.
  Args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // Names of the options that were given, in command-line order.
  const std::vector<std::string>& given() const { return order_; }

  // The raw value of an option that takes one (throws if absent).
  const std::string& str(const std::string& name) const;
  // A whole-number value in [lo, hi].
  int64_t integer(const std::string& name, int64_t lo, int64_t hi) const;
  // A comma-separated list of finite numbers (at least one).
  std::vector<double> numbers(const std::string& name) const;
  // A list split on `sep`, empty items rejected, surrounding spaces trimmed
  // (sep ' ' splits on runs of spaces).
  std::vector<std::string> words(const std::string& name, char sep) const;

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> order_;
};

// Strict parsers shared with the commands; `what` names the input in errors.
int64_t parse_integer(const std::string& text, const std::string& what);
double parse_number(const std::string& text, const std::string& what);

// The options as help text: "  --name METAVAR   help", wrapped help aligned.
std::string format_options(const std::vector<OptionSpec>& specs);
// The same in a language: Chinese help where an option has it (teach::Lang::zh).
std::string format_options(const std::vector<OptionSpec>& specs, teach::Lang lang);

}  // namespace attn::cli
