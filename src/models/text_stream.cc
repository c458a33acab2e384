// Generated token ids as streamed text (include/attn/models/text_stream.h).
#include <attn/models/text_stream.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <string_view>

namespace attn::models {

TextStream::TextStream(Decode decode, std::vector<std::string> stop)
    : decode_(std::move(decode)), stop_(std::move(stop)) {
  std::erase_if(stop_, [](const std::string& s) { return s.empty(); });
}

std::string TextStream::push(int32_t id) {
  if (stopped_) return "";
  ids_.push_back(id);
  return advance(false);
}

std::string TextStream::finish() { return stopped_ ? "" : advance(true); }

std::string TextStream::advance(bool final) {
  const std::string raw = decode_(ids_);
  if (raw.size() > consumed_)
    consumed_ += text::append_valid_utf8(clean_, std::string_view(raw).substr(consumed_), final);
  else if (final && raw.size() < consumed_)
    consumed_ = raw.size();
  std::size_t upto = clean_.size();
  // The first stop string: no match can start in text already returned, since text that could
  // begin one is held back below.
  std::size_t hit = std::string::npos;
  for (const std::string& s : stop_) hit = std::min(hit, clean_.find(s, text_.size()));
  if (hit != std::string::npos) {
    stopped_ = true;
    upto = hit;
  } else if (!final) {
    // Hold back the longest tail that is the start of a stop string.
    const std::string_view open = std::string_view(clean_).substr(text_.size());
    std::size_t hold = 0;
    for (const std::string& s : stop_)
      for (std::size_t k = std::min(s.size() - 1, open.size()); k > hold; --k)
        if (open.substr(open.size() - k) == std::string_view(s).substr(0, k)) {
          hold = k;
          break;
        }
    upto -= hold;
    while (upto > text_.size() && (static_cast<unsigned char>(clean_[upto]) & 0xC0) == 0x80) --upto;
  }
  std::string piece = clean_.substr(text_.size(), upto - text_.size());
  text_ += piece;
  return piece;
}

}  // namespace attn::models
