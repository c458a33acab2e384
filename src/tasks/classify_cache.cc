// The frozen part's cache of a fine-tune (classify_cache.h).
#include "tasks/classify_cache.h"

#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/models/bert.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <system_error>

namespace attn::tasks::detail {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'A', 'T', 'T', 'N', 'F', 'Z', 'C', '1'};
constexpr uint64_t kHeaderBytes = 8 + 8 * 8;  // magic, 7 key fields, the entry count
constexpr uint64_t kEntryBytes = 16;          // row, length
constexpr uint64_t kTrailerBytes = 8;         // checksum

// A 64-bit hash over a byte stream, eight bytes at a time (the result does not depend on how
// the stream is cut into add() calls). For integrity checks and cache keys, not for security.
class StreamHash {
 public:
  void add(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0 && fill_ > 0) {
      buf_[fill_++] = *p++;
      --n;
      if (fill_ == 8) word(buf_), fill_ = 0;
    }
    for (; n >= 8; p += 8, n -= 8) word(p);
    for (; n > 0; --n) buf_[fill_++] = *p++;
  }
  uint64_t value() const {
    uint64_t h = h_ ^ (bytes_ + fill_);
    for (int i = 0; i < fill_; ++i) h = (h ^ buf_[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
  }

 private:
  void word(const unsigned char* p) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h_ = (h_ ^ w) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
    bytes_ += 8;
  }
  uint64_t h_ = 0xcbf29ce484222325ull, bytes_ = 0;
  unsigned char buf_[8] = {};
  int fill_ = 0;
};

struct Header {
  char magic[8];
  uint64_t model_bytes, model_hash;
  int64_t frozen_layers, max_len, hidden, rows;
  uint64_t data_hash;
  int64_t entries;
};

void put(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }

uint64_t get(const std::string& s, std::size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

}  // namespace

void hash_model_file(const std::string& path, uint64_t& bytes, uint64_t& hash) {
  std::ifstream in(path, std::ios::binary);
  ATTN_CHECK(in, "frozen-part cache: cannot open the model file '", path, "' to key the cache");
  StreamHash h;
  std::vector<char> buf(1 << 20);
  bytes = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    h.add(buf.data(), n);
    bytes += n;
  }
  ATTN_CHECK(in.eof(), "frozen-part cache: error reading the model file '", path, "'");
  hash = h.value();
}

uint64_t hash_id_lists(const std::vector<std::vector<int32_t>>& ids) {
  StreamHash h;
  const uint64_t n = ids.size();
  h.add(&n, 8);
  for (const auto& v : ids) {
    const uint64_t len = v.size();
    h.add(&len, 8);
    h.add(v.data(), v.size() * sizeof(int32_t));
  }
  return h.value();
}

std::string frozen_cache_path(const std::string& dir, const FrozenCacheKey& key) {
  return (fs::path(dir) / (key.encoder + "-k" + std::to_string(key.frozen_layers) + "-len" +
                           std::to_string(key.max_len) + ".frozen"))
      .string();
}

std::string load_frozen_cache(const std::string& path, const FrozenCacheKey& key,
                              const std::vector<int64_t>& lengths, std::vector<Tensor>& out) {
  out.assign(static_cast<std::size_t>(key.rows), Tensor());
  std::error_code ec;
  if (!fs::exists(path, ec)) return "no file yet";
  if (!fs::is_regular_file(path, ec)) return "corrupt: not a regular file";
  const uint64_t size = fs::file_size(path, ec);
  if (ec) return "corrupt: cannot read its size (" + ec.message() + ")";
  if (size < kHeaderBytes + kTrailerBytes)
    return "corrupt: " + std::to_string(size) + " bytes, shorter than the header (" +
           std::to_string(kHeaderBytes + kTrailerBytes) + ")";
  std::ifstream in(path, std::ios::binary);
  if (!in) return "corrupt: cannot open it";
  std::string head(kHeaderBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  if (!in) return "corrupt: cannot read the header";
  if (std::memcmp(head.data(), kMagic, 8) != 0) return "corrupt: not a frozen-part cache (bad magic)";
  Header h{};
  std::memcpy(h.magic, head.data(), 8);
  h.model_bytes = get(head, 8);
  h.model_hash = get(head, 16);
  h.frozen_layers = static_cast<int64_t>(get(head, 24));
  h.max_len = static_cast<int64_t>(get(head, 32));
  h.hidden = static_cast<int64_t>(get(head, 40));
  h.rows = static_cast<int64_t>(get(head, 48));
  h.data_hash = get(head, 56);
  h.entries = static_cast<int64_t>(get(head, 64));
  auto stale = [](const std::string& what, const std::string& found, const std::string& want) {
    return "stale: made for " + what + " " + found + ", this run has " + want;
  };
  if (h.model_bytes != key.model_bytes || h.model_hash != key.model_hash)
    return stale("a model file of", std::to_string(h.model_bytes) + " bytes (another file or version)",
                 std::to_string(key.model_bytes) + " bytes");
  if (h.frozen_layers != key.frozen_layers)
    return stale("frozen layers", std::to_string(h.frozen_layers), std::to_string(key.frozen_layers));
  if (h.max_len != key.max_len)
    return stale("max length", std::to_string(h.max_len), std::to_string(key.max_len));
  if (h.hidden != key.hidden)
    return stale("hidden width", std::to_string(h.hidden), std::to_string(key.hidden));
  if (h.rows != key.rows || h.data_hash != key.data_hash)
    return stale("another data set:", std::to_string(h.rows) + " examples (or other texts)",
                 std::to_string(key.rows) + " examples");
  if (h.entries < 0 || h.entries > h.rows)
    return "corrupt: " + std::to_string(h.entries) + " entries for " + std::to_string(h.rows) + " examples";
  const auto entries = static_cast<uint64_t>(h.entries);
  if (kHeaderBytes + entries * kEntryBytes + kTrailerBytes > size)
    return "corrupt: the entry table (" + std::to_string(entries) + " entries) runs past the end of the file";
  std::string table(entries * kEntryBytes, '\0');
  in.read(table.data(), static_cast<std::streamsize>(table.size()));
  if (!in) return "corrupt: cannot read the entry table";
  StreamHash sum;
  sum.add(head.data(), head.size());
  sum.add(table.data(), table.size());
  std::vector<int64_t> rows(entries), lens(entries);
  std::vector<bool> seen(static_cast<std::size_t>(h.rows), false);
  uint64_t floats = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    const auto r = static_cast<int64_t>(get(table, e * kEntryBytes));
    const auto l = static_cast<int64_t>(get(table, e * kEntryBytes + 8));
    if (r < 0 || r >= h.rows)
      return "corrupt: entry " + std::to_string(e) + " names row " + std::to_string(r);
    if (seen[static_cast<std::size_t>(r)]) return "corrupt: row " + std::to_string(r) + " appears twice";
    seen[static_cast<std::size_t>(r)] = true;
    if (l < 1 || l > h.max_len || l != lengths[static_cast<std::size_t>(r)])
      return "corrupt: row " + std::to_string(r) + " has " + std::to_string(l) + " pieces in the file, " +
             std::to_string(lengths[static_cast<std::size_t>(r)]) + " in the data";
    rows[e] = r;
    lens[e] = l;
    floats += static_cast<uint64_t>(l) * static_cast<uint64_t>(h.hidden);
  }
  const uint64_t expected = kHeaderBytes + entries * kEntryBytes + floats * sizeof(float) + kTrailerBytes;
  if (size != expected)
    return "corrupt: " + std::to_string(size) + " bytes where its table says " + std::to_string(expected);
  std::vector<Tensor> got(static_cast<std::size_t>(h.rows));
  for (uint64_t e = 0; e < entries; ++e) {
    Tensor t = Tensor::zeros({lens[e], h.hidden});
    const auto n = static_cast<std::size_t>(t.numel()) * sizeof(float);
    in.read(reinterpret_cast<char*>(t.data<float>()), static_cast<std::streamsize>(n));
    if (!in) return "corrupt: cannot read row " + std::to_string(rows[e]);
    sum.add(t.data<float>(), n);
    got[static_cast<std::size_t>(rows[e])] = std::move(t);
  }
  std::string trailer(kTrailerBytes, '\0');
  in.read(trailer.data(), static_cast<std::streamsize>(trailer.size()));
  if (!in) return "corrupt: cannot read the checksum";
  if (get(trailer, 0) != sum.value()) return "corrupt: the checksum does not match its contents";
  out = std::move(got);
  return "";
}

void save_frozen_cache(const std::string& path, const FrozenCacheKey& key, const std::vector<Tensor>& rows) {
  ATTN_CHECK(static_cast<int64_t>(rows.size()) == key.rows, "frozen-part cache: ", rows.size(),
             " rows given for a key of ", key.rows);
  std::string head(kMagic, 8);
  put(head, key.model_bytes);
  put(head, key.model_hash);
  put(head, static_cast<uint64_t>(key.frozen_layers));
  put(head, static_cast<uint64_t>(key.max_len));
  put(head, static_cast<uint64_t>(key.hidden));
  put(head, static_cast<uint64_t>(key.rows));
  put(head, key.data_hash);
  std::string table;
  int64_t entries = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].defined()) continue;
    ATTN_CHECK(rows[r].rank() == 2 && rows[r].dtype() == DType::f32 && rows[r].size(1) == key.hidden &&
                   rows[r].is_contiguous(),
               "frozen-part cache: row ", r, " is not a contiguous [length, ", key.hidden, "] matrix");
    put(table, static_cast<uint64_t>(r));
    put(table, static_cast<uint64_t>(rows[r].size(0)));
    ++entries;
  }
  put(head, static_cast<uint64_t>(entries));
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  io::AtomicFile f(path, "frozen-part cache");
  StreamHash sum;
  f.write(head);
  sum.add(head.data(), head.size());
  f.write(table);
  sum.add(table.data(), table.size());
  for (const Tensor& t : rows) {
    if (!t.defined()) continue;
    const auto n = static_cast<std::size_t>(t.numel()) * sizeof(float);
    f.write(t.data<float>(), n);
    sum.add(t.data<float>(), n);
  }
  std::string trailer;
  put(trailer, sum.value());
  f.write(trailer);
  f.commit();
}

std::vector<Tensor> frozen_rows(const models::BertModel& model, const std::vector<std::vector<int32_t>>& ids,
                                int64_t k, int64_t& tokens, int64_t batch) {
  ATTN_CHECK(k >= 0 && k <= model.config().num_layers, "frozen part: k must be in [0, ",
             model.config().num_layers, "]; got ", k);
  ATTN_CHECK(batch >= 1, "frozen part: batch must be >= 1; got ", batch);
  std::vector<std::size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return ids[a].size() < ids[b].size(); });
  models::BertRunOptions ro;
  ro.layers = k;
  ro.quantized_max_tokens = 0;  // f32 products, as the nn modules
  const int64_t C = model.config().hidden_size;
  std::vector<Tensor> out(ids.size());
  for (std::size_t b0 = 0; b0 < order.size(); b0 += static_cast<std::size_t>(batch)) {
    const std::size_t b1 = std::min(order.size(), b0 + static_cast<std::size_t>(batch));
    models::BertInput in;
    for (std::size_t i = b0; i < b1; ++i) in.ids.push_back(ids[order[i]]);
    const models::BertOutput o = model.forward(in, ro);  // hidden: [B, L, C]
    const int64_t L = o.hidden.size(1);
    const Tensor hidden = o.hidden.contiguous();
    const float* h = hidden.data<float>();
    for (std::size_t i = b0; i < b1; ++i) {
      const int64_t n = o.lengths[i - b0];
      Tensor t = Tensor::empty({n, C});
      std::copy(h + static_cast<int64_t>(i - b0) * L * C, h + (static_cast<int64_t>(i - b0) * L + n) * C,
                t.data<float>());
      out[order[i]] = std::move(t);
      tokens += n;
    }
  }
  return out;
}

}  // namespace attn::tasks::detail
