// TEMPORARY placeholder; replaced by the explain implementation.
#include <cstdio>
#include "commands.h"
namespace attn::cli {
int run_explain(const std::vector<std::string>&) { std::printf("explain\n"); return 0; }
}
