// Where a task recipe's progress goes. Recipes never print; they hand text to
// the caller's callback, exactly as a terminal should show it: notes are whole
// lines ending in "\n"; with `terminal` set, the live progress line is redrawn
// in place with "\r" (and ended with "\n" before the next note).
#pragma once

#include <functional>
#include <string>

namespace attn::tasks {

struct Progress {
  std::function<void(const std::string&)> write;  // empty: no progress at all
  bool terminal = false;                          // the output is a terminal (live "\r" lines)

  explicit operator bool() const { return static_cast<bool>(write); }
  void operator()(const std::string& text) const {
    if (write) write(text);
  }
};

}  // namespace attn::tasks
