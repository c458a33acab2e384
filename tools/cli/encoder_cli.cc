#include "encoder_cli.h"

#include <attn/core/error.h>

namespace attn::cli::encoder {

SplitArgs split_args(const std::vector<std::string>& raw, const std::vector<OptionSpec>& specs) {
  SplitArgs s;
  bool rest = false;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (rest || a == "-" || a.empty() || a[0] != '-') {
      s.positionals.push_back(a);
    } else if (a == "--") {
      rest = true;
    } else if (a == "-o") {
      ATTN_CHECK(i + 1 < raw.size(), "option -o needs a value (FILE); got nothing after it");
      s.options.push_back("--output");
      s.options.push_back(raw[++i]);
    } else {
      s.options.push_back(a);
      if (a.size() > 2 && a.find('=') == std::string::npos)
        for (const auto& o : specs)
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) s.options.push_back(raw[++i]);
    }
  }
  return s;
}

}  // namespace attn::cli::encoder
