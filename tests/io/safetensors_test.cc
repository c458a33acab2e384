// safetensors writer and reader: round trips for every dtype and shape,
// conversions on load, atomic replacement, and writer-side errors.
// (Crafted bad files are in safetensors_bad_test.cc.)
#include <attn/core/f16.h>
#include <attn/io/safetensors.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

#include "io/io_test_util.h"
#include "testing/testing.h"

namespace attn::io {
namespace {

using testing::ScratchDir;

// Seeded values of `dtype`; float dtypes get NaN, ±inf and −0 mixed in so the
// round trip is checked bit for bit on special values too.
Tensor sample(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t;
  switch (dtype) {
    case DType::u8:
      t = testing::random_uniform(shape, seed, 0, 256).to(DType::u8);
      break;
    case DType::i32:
      t = testing::random_uniform(shape, seed, -2.1e9, 2.1e9).to(DType::i32);
      break;
    case DType::i64:
      t = testing::random_uniform(shape, seed, -9e18, 9e18).to(DType::i64);
      break;
    default:
      t = testing::random_uniform(shape, seed, -3, 3, dtype);
  }
  if (t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::bf16) {
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, -0.0};
    const int64_t n = t.numel();
    Tensor flat = t.view({n});
    for (int64_t i = 0; i < std::min<int64_t>(n, 4); ++i) flat.set({(i * 7) % n}, specials[i]);
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(),
                     static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

struct RoundTripCase {
  DType dtype;
  Shape shape;
};

void PrintTo(const RoundTripCase& c, std::ostream* os) { *os << dtype_name(c.dtype) << shape_str(c.shape); }

class SafeTensorsRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(SafeTensorsRoundTrip, EveryBitComesBack) {
  const RoundTripCase& c = GetParam();
  ScratchDir dir;
  const std::string path = dir.file("t.safetensors");
  const Tensor t = sample(c.shape, c.dtype, 17);
  // A second tensor after it checks that offsets of later tensors are right.
  const Tensor after = sample({3}, DType::f32, 18);
  save_safetensors(path, {{"x", t}, {"after", after}}, {{"k", "v"}});

  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.header_size() % 8, 0u);  // data section 8-byte aligned
  EXPECT_EQ(f.names(), (std::vector<std::string>{"x", "after"}));
  const TensorInfo& info = f.info("x");
  EXPECT_EQ(info.dtype, st_dtype_of(c.dtype));
  EXPECT_EQ(info.shape, c.shape);
  EXPECT_EQ(info.numel, t.numel());
  EXPECT_EQ(f.bytes("x").size(), static_cast<std::size_t>(t.numel()) * dtype_size(c.dtype));
  const Tensor back = f.load("x", c.dtype);
  EXPECT_TRUE(same_bytes(back, t)) << back.str();
  EXPECT_TRUE(same_bytes(f.load("after", DType::f32), after));
  EXPECT_EQ(f.metadata(), (Metadata{{"k", "v"}}));
  EXPECT_EQ(f.file_size(), 8 + f.header_size() + (t.numel() * dtype_size(c.dtype)) + 12);
}

std::vector<RoundTripCase> round_trip_cases() {
  std::vector<RoundTripCase> out;
  const Shape shapes[] = {{}, {0}, {1}, {5}, {2, 3}, {2, 0, 4}, {1, 1, 1, 7}, {3, 1, 2, 5}};
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::i32, DType::u8})
    for (const Shape& s : shapes) out.push_back({t, s});
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    DTypesAndShapes, SafeTensorsRoundTrip, ::testing::ValuesIn(round_trip_cases()), [](const auto& info) {
      std::ostringstream os;  // (string + to_string trips a GCC 12 -Wrestrict false positive)
      os << dtype_name(info.param.dtype) << "_r" << info.param.shape.size();
      for (int64_t d : info.param.shape) os << "_" << d;
      return os.str();
    });

TEST(SafeTensors, ManyTensorsKeepInsertionOrderAndNames) {
  ScratchDir dir;
  const std::string path = dir.file("many.safetensors");
  std::vector<std::pair<std::string, Tensor>> ts;
  // Names that sort differently from insertion order, plus non-ASCII and JSON-special characters.
  const std::string names[] = {
      "z.weight",           "a.bias",   "layers.10.attn", "layers.2.attn", "\xc3\xa9t\xc3\xa9",
      "quote\"back\\slash", "tab\there"};
  for (std::size_t i = 0; i < std::size(names); ++i) ts.emplace_back(names[i], sample({2, 3}, DType::f32, i));
  save_safetensors(path, ts);
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  ASSERT_EQ(f.names().size(), std::size(names));
  uint64_t expect_begin = 0;
  for (std::size_t i = 0; i < std::size(names); ++i) {
    EXPECT_EQ(f.names()[i], names[i]);
    EXPECT_TRUE(f.contains(names[i]));
    EXPECT_TRUE(same_bytes(f.load(names[i]), ts[i].second)) << names[i];
    EXPECT_EQ(f.info(names[i]).begin, expect_begin);  // data laid out in insertion order
    expect_begin = f.info(names[i]).end;
  }
  EXPECT_TRUE(f.metadata().empty());
}

TEST(SafeTensors, NonContiguousInputsAreWrittenRowMajor) {
  ScratchDir dir;
  const std::string path = dir.file("views.safetensors");
  const Tensor base = sample({4, 6}, DType::f32, 3);
  const Tensor t = base.transpose(0, 1);                       // [6, 4], strides (1, 6)
  const Tensor s = base.slice(1, 1, 6, 2);                     // [4, 3], every other column
  const Tensor e = sample({3}, DType::f64, 4).expand({2, 3});  // stride 0
  ASSERT_FALSE(t.is_contiguous());
  save_safetensors(path, {{"t", t}, {"s", s}, {"e", e}});
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_TRUE(same_bytes(f.load("t"), t));  // same_bytes compares row-major contents
  EXPECT_TRUE(same_bytes(f.load("s"), s));
  EXPECT_TRUE(same_bytes(f.load("e", DType::f64), e));
  EXPECT_EQ(f.info("t").shape, (Shape{6, 4}));
}

TEST(SafeTensors, LoadConvertsF16Bf16AndBool) {
  ScratchDir dir;
  const std::string path = dir.file("conv.safetensors");
  std::vector<uint16_t> h(64), bf(64);
  for (int i = 0; i < 64; ++i) {
    h[i] = static_cast<uint16_t>(i * 1021 + 3);  // spread over the bit patterns
    bf[i] = static_cast<uint16_t>(i * 1009 + 5);
  }
  const uint8_t bools[] = {0, 1, 1, 0, 2, 255};  // any nonzero byte reads as true
  const int32_t ints[] = {-5, 0, 7, 2147483647};
  save_safetensors_raw(path, {{"h", StDType::F16, {8, 8}, h.data()},
                              {"bf", StDType::BF16, {64}, bf.data()},
                              {"b", StDType::BOOL, {2, 3}, bools},
                              {"i", StDType::I32, {4}, ints}});
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.info("h").dtype, StDType::F16);
  EXPECT_EQ(f.info("b").dtype, StDType::BOOL);
  const Tensor hf = f.load("h");
  const Tensor hd = f.load("h", DType::f64);
  const Tensor bff = f.load("bf");
  for (int i = 0; i < 64; ++i) {
    const double want = f16_to_f32(h[i]);
    const double got = hf.data<float>()[i];
    EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << i;
    EXPECT_TRUE(hd.data<double>()[i] == want || std::isnan(want)) << i;
    const float bwant = bf16::to_float(bf[i]);
    EXPECT_TRUE(bff.data<float>()[i] == bwant || (std::isnan(bwant) && std::isnan(bff.data<float>()[i])))
        << i;
  }
  // BF16 stored → bf16 requested is a plain copy.
  EXPECT_EQ(std::memcmp(f.load("bf", DType::bf16).raw_data(), bf.data(), 128), 0);
  EXPECT_EQ(f.load("b", DType::u8).to_vector(), (std::vector<double>{0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(f.load("b", DType::f32).to_vector(), (std::vector<double>{0, 1, 1, 0, 1, 1}));
  EXPECT_EQ(f.load("i", DType::i64).to_vector(), (std::vector<double>{-5, 0, 7, 2147483647}));
  EXPECT_EQ(f.load("i", DType::f64).to_vector(), (std::vector<double>{-5, 0, 7, 2147483647}));
  // f32 → bf16 on load rounds to nearest even, like Tensor::to.
  save_safetensors(dir.file("f.safetensors"), {{"x", sample({9}, DType::f32, 5)}});
  const SafeTensorsFile g = SafeTensorsFile::open(dir.file("f.safetensors"));
  EXPECT_TRUE(same_bytes(g.load("x", DType::bf16), g.load("x").to(DType::bf16)));
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected attn::Error containing '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(SafeTensors, LoadRejectsLossyIntegerConversions) {
  ScratchDir dir;
  const std::string path = dir.file("ints.safetensors");
  save_safetensors(path, {{"big", Tensor::from<int64_t>({1, int64_t{1} << 40}, {2})},
                          {"neg", Tensor::from<int32_t>({3, -1}, {2})},
                          {"f", Tensor::from<float>({1.5f}, {1})}});
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  expect_error([&] { f.load("big", DType::i32); },
               {path, "tensor 'big'", "element 1 is 1099511627776", "does not fit in i32"});
  expect_error([&] { f.load("neg", DType::u8); }, {"tensor 'neg'", "element 1 is -1", "u8"});
  expect_error([&] { f.load("f", DType::i64); }, {"tensor 'f'", "cannot load F32 data as i64"});
  EXPECT_EQ(f.load("big", DType::i64).to_vector(), (std::vector<double>{1, 1099511627776.0}));
}

TEST(SafeTensors, MissingTensorNamesTheFileAndWhatIsThere) {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  save_safetensors(path, {{"alpha", Tensor::zeros({1})}, {"beta", Tensor::zeros({1})}});
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_FALSE(f.contains("gamma"));
  expect_error([&] { f.info("gamma"); }, {path, "no tensor named 'gamma'", "2 tensors", "'alpha', 'beta'"});
  expect_error([&] { f.load("gamma"); }, {"gamma"});
  expect_error([&] { f.bytes("gamma"); }, {"gamma"});
}

TEST(SafeTensors, LoadedTensorsOutliveTheFileObject) {
  ScratchDir dir;
  const std::string path = dir.file("life.safetensors");
  const Tensor t = sample({16}, DType::f32, 9);
  save_safetensors(path, {{"t", t}});
  Tensor back;
  {
    const SafeTensorsFile f = SafeTensorsFile::open(path);
    back = f.load("t");
  }
  EXPECT_TRUE(same_bytes(back, t));
}

TEST(SafeTensors, WriterRejectsBadNamesAndTensorsWithoutLeavingFiles) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  const Tensor t = Tensor::zeros({2});
  expect_error([&] { save_safetensors(path, {{"a", t}, {"a", t}}); }, {path, "'a' appears twice"});
  expect_error([&] { save_safetensors(path, {{"", t}}); }, {"non-empty"});
  expect_error([&] { save_safetensors(path, {{"__metadata__", t}}); }, {"reserved"});
  expect_error([&] { save_safetensors(path, {{"u", Tensor()}}); }, {"tensor 'u' is undefined"});
  expect_error([&] { save_safetensors(path, {{"bad\xff", t}}); }, {"not valid UTF-8"});
  expect_error([&] { save_safetensors(path, {{"a", t}}, {{"k", "\xc0\x80"}}); }, {"not valid UTF-8"});
  expect_error(
      [&] {
        save_safetensors(dir.file("no/such/dir.safetensors"), {{"a", t}});
      },
      {"cannot create the temporary file", "No such file or directory"});
  EXPECT_TRUE(dir.files().empty()) << dir.files().front();
}

TEST(SafeTensors, SaveReplacesAnExistingFile) {
  ScratchDir dir;
  const std::string path = dir.file("r.safetensors");
  save_safetensors(path, {{"old", Tensor::zeros({100})}});
  const SafeTensorsFile before = SafeTensorsFile::open(path);  // holds the old mapping
  save_safetensors(path, {{"new", Tensor::full({2}, 3.0)}});
  const SafeTensorsFile after = SafeTensorsFile::open(path);
  EXPECT_EQ(after.names(), std::vector<std::string>{"new"});
  EXPECT_EQ(after.load("new").to_vector(), (std::vector<double>{3, 3}));
  // The old reader still sees the old, intact file (rename, not rewrite in place).
  EXPECT_EQ(before.load("old").numel(), 100);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"r.safetensors"});
}

TEST(SafeTensors, FailedWriteLeavesThePreviousFileAndNoTemporary) {
  ScratchDir dir;
  const std::string path = dir.file("a.safetensors");
  const Tensor small = sample({8}, DType::f32, 1);
  save_safetensors(path, {{"small", small}});
  const std::string before = testing::read_bytes(path);

  // Make the write fail half way: a file size limit below the new file's size.
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of a signal
  rlimit lim = old;
  lim.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  bool threw = false;
  std::string msg;
  try {
    save_safetensors(path, {{"big", Tensor::zeros({1 << 16})}});
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);

  ASSERT_TRUE(threw);
  EXPECT_NE(msg.find("writing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the previous file, if any, is unchanged"), std::string::npos) << msg;
  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"a.safetensors"});  // temporary removed
  EXPECT_TRUE(same_bytes(SafeTensorsFile::open(path).load("small"), small));
}

TEST(SafeTensors, DTypeTables) {
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::i32, DType::i64, DType::u8}) {
    EXPECT_EQ(exact_dtype(st_dtype_of(t)), t);
    EXPECT_EQ(st_dtype_size(st_dtype_of(t)), dtype_size(t));
  }
  EXPECT_EQ(exact_dtype(StDType::F16), std::nullopt);
  EXPECT_EQ(exact_dtype(StDType::BOOL), DType::u8);
  EXPECT_STREQ(st_dtype_name(StDType::BF16), "BF16");
}

}  // namespace
}  // namespace attn::io
