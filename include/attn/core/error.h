// attn::Error: the one exception type the library throws.
//
// Library code never aborts the process. Every failed check throws an Error
// whose message says what was expected and what was found, for example
//   "attention: q must have rank 4 [B, H, Lq, D]; got rank 3 [2, 5, 7]".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace attn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}
}  // namespace detail

// Throws attn::Error built from the streamed parts when `cond` is false.
#define ATTN_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) throw ::attn::Error(::attn::detail::concat(__VA_ARGS__)); \
  } while (0)

}  // namespace attn
