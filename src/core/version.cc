#include <attn/version.h>

namespace attn {

std::string_view version() noexcept { return ATTN_VERSION_STRING; }

}  // namespace attn
