// Every header validation rule of the safetensors reader, each with a crafted
// file: open() must throw attn::Error whose message names the file, the
// tensor and what was expected — never crash, never read out of bounds (this
// suite also runs under the asan preset). Also the committed corpus in
// tests/io/data/ (python/reference/make_safetensors_test_files.py).
#include <attn/io/safetensors.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "testing/testing.h"

namespace attn::io {
namespace {

using testing::st_bytes;

// One tensor entry as header JSON.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets +
         "}";
}

std::string zeros(std::size_t n) { return std::string(n, '\0'); }

struct BadFile {
  std::string name;
  std::string bytes;
  std::vector<std::string> expected;  // substrings of the error message (the path is always checked)
};

void PrintTo(const BadFile& b, std::ostream* os) { *os << b.name; }

class SafeTensorsRejects : public ::testing::TestWithParam<BadFile> {};

TEST_P(SafeTensorsRejects, WithAUsefulMessage) {
  const BadFile& b = GetParam();
  testing::ScratchDir dir;
  const std::string path = dir.file(b.name + ".safetensors");
  testing::write_bytes(path, b.bytes);
  try {
    SafeTensorsFile::open(path);
    FAIL() << "opened without error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("safetensors: " + path + ": "), std::string::npos) << msg;
    for (const std::string& part : b.expected) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

const std::string kOne = entry("a", "F32", "[1]", "[0,4]");

INSTANTIATE_TEST_SUITE_P(
    Header, SafeTensorsRejects,
    ::testing::Values(
        // ---- the length prefix
        BadFile{"EmptyFile", "", {"file is 0 bytes; expected at least 8"}},
        BadFile{"SevenBytes", std::string("\x01\0\0\0\0\0\0", 7), {"file is 7 bytes"}},
        BadFile{
            "HeaderLengthPastEnd",
            st_bytes(1000, "{}"),
            {"header length 1000 runs past the end of the file (10 bytes, so at most 2 bytes of header)"}},
        BadFile{"HeaderLengthOneTooMany", st_bytes(3, "{}"), {"header length 3 runs past the end"}},
        BadFile{"HeaderLengthAbsurd",
                st_bytes(uint64_t{1} << 40, "{}"),
                {"exceeds the limit of 104857600 bytes"}},
        BadFile{"HeaderLengthAllOnes",
                st_bytes(~uint64_t{0}, "{}"),
                {"header length 18446744073709551615 exceeds the limit"}},
        BadFile{"HeaderLengthZero", st_bytes(""), {"not valid JSON", "got end of input"}},
        // ---- UTF-8 and JSON
        BadFile{"InvalidUtf8InName",
                st_bytes("{" + entry("a\xff", "F32", "[1]", "[0,4]") + "}", zeros(4)),
                {"not valid UTF-8: byte 0xff at header offset 3 (file offset 11)"}},
        BadFile{"SurrogateInMetadata",
                st_bytes("{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}"),
                {"not valid UTF-8: byte 0xed"}},
        BadFile{
            "OverlongInPadding", st_bytes("{}  \xc0\xa0"), {"not valid UTF-8: byte 0xc0 at header offset 4"}},
        BadFile{"InvalidJsonUnterminated",
                st_bytes("{" + kOne, zeros(4)),
                {"not valid JSON", "json: at byte 53: expected ',' or '}'", "got end of input"}},
        BadFile{"InvalidJsonTrailingComma", st_bytes("{" + kOne + ",}", zeros(4)), {"not valid JSON"}},
        BadFile{"NulPadding", st_bytes(std::string("{}\0\0", 4)), {"not valid JSON", "got byte 0x00"}},
        BadFile{"DuplicateTensorName",
                st_bytes("{" + kOne + "," + kOne + "}", zeros(4)),
                {"duplicate key \"a\""}},
        BadFile{"DeepNesting",
                st_bytes("{\"__metadata__\":" + std::string(300, '[') + std::string(300, ']') + "}"),
                {"nesting of at most 128"}},
        BadFile{"TopLevelArray", st_bytes("[]"), {"header must be a JSON object; got JSON array"}},
        // ---- tensor entries
        BadFile{
            "EntryNotObject", st_bytes("{\"a\":5}"), {"tensor 'a': expected an object", "got JSON number"}},
        BadFile{
            "UnknownDtype",
            st_bytes("{" + entry("w", "F8_E4M3", "[4]", "[0,4]") + "}", zeros(4)),
            {"tensor 'w': unknown dtype \"F8_E4M3\"", "supported: F64, F32, F16, BF16, I64, I32, U8, BOOL"}},
        BadFile{"LowercaseDtype",
                st_bytes("{" + entry("w", "f32", "[1]", "[0,4]") + "}", zeros(4)),
                {"unknown dtype \"f32\""}},
        BadFile{"DtypeNotString",
                st_bytes(R"({"a":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                {"tensor 'a': \"dtype\" must be a string; got 3"}},
        BadFile{"MissingDtype",
                st_bytes(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", zeros(4)),
                {"tensor 'a': missing \"dtype\""}},
        BadFile{"MissingShape",
                st_bytes(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", zeros(4)),
                {"tensor 'a': missing \"shape\""}},
        BadFile{"MissingOffsets",
                st_bytes(R"({"a":{"dtype":"F32","shape":[1]}})", zeros(4)),
                {"tensor 'a': missing \"data_offsets\""}},
        BadFile{"UnexpectedKey",
                st_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"strides":[1]}})", zeros(4)),
                {"tensor 'a': unexpected key \"strides\""}},
        BadFile{"ShapeNotArray",
                st_bytes("{" + entry("a", "F32", "4", "[0,16]") + "}", zeros(16)),
                {"tensor 'a': \"shape\" must be an array of sizes; got 4"}},
        BadFile{"NegativeSize",
                st_bytes("{" + entry("a", "F32", "[2,-1]", "[0,4]") + "}", zeros(4)),
                {"tensor 'a': shape[1] must be a non-negative integer; got -1"}},
        BadFile{"FractionalSize",
                st_bytes("{" + entry("a", "F32", "[2.5]", "[0,4]") + "}", zeros(4)),
                {"shape[0] must be a non-negative integer; got 2.5"}},
        BadFile{"SizeBeyondInt64",
                st_bytes("{" + entry("a", "F32", "[1e30]", "[0,4]") + "}", zeros(4)),
                {"shape[0] must be a non-negative integer; got 1e+30"}},
        BadFile{"AbsurdShapeOverflowsElements",
                st_bytes("{" + entry("a", "F32", "[4294967296,4294967296]", "[0,4]") + "}", zeros(4)),
                {"tensor 'a': shape [4294967296, 4294967296]... has more elements than fit in int64"}},
        BadFile{"AbsurdShapeOverflowsBytes",
                st_bytes("{" + entry("a", "F64", "[2305843009213693952]", "[0,8]") + "}", zeros(8)),
                {"tensor 'a': shape [2305843009213693952] × 8 bytes overflows int64"}},
        BadFile{"AbsurdShapeWithTinyData",
                st_bytes("{" + entry("a", "F32", "[1000000000]", "[0,4]") + "}", zeros(4)),
                {"tensor 'a': data_offsets [0, 4] hold 4 bytes; expected 4000000000 = 1000000000 elements of "
                 "F32"}},
        // ---- data offsets
        BadFile{"ByteCountTooSmall",
                st_bytes("{" + entry("a", "F32", "[2,3]", "[0,20]") + "}", zeros(24)),
                {"tensor 'a': data_offsets [0, 20] hold 20 bytes; expected 24 = 6 elements of F32 (4 bytes "
                 "each) for "
                 "shape [2, 3]"}},
        BadFile{"ByteCountTooLarge",
                st_bytes("{" + entry("a", "BF16", "[3]", "[0,8]") + "}", zeros(8)),
                {"hold 8 bytes; expected 6 = 3 elements of BF16"}},
        BadFile{"BeginAfterEnd",
                st_bytes("{" + entry("a", "F32", "[0]", "[8,4]") + "}", zeros(8)),
                {"tensor 'a': data_offsets [8, 4] must have begin <= end"}},
        BadFile{"OffsetsOutsideFile",
                st_bytes("{" + entry("a", "F32", "[100]", "[0,400]") + "}", zeros(8)),
                {"tensor 'a': data_offsets end 400 is past the end of the data section (8 bytes"}},
        BadFile{"EmptyTensorOutsideFile",
                st_bytes("{" + entry("a", "F32", "[0]", "[9,9]") + "}", zeros(8)),
                {"data_offsets end 9 is past the end of the data section"}},
        BadFile{"OffsetsNotAPair",
                st_bytes("{" + entry("a", "F32", "[1]", "[0]") + "}", zeros(4)),
                {"tensor 'a': \"data_offsets\" must be an array [begin, end]; got [0]"}},
        BadFile{"OffsetsThree",
                st_bytes("{" + entry("a", "F32", "[1]", "[0,4,8]") + "}", zeros(8)),
                {"must be an array [begin, end]; got [0,4,8]"}},
        BadFile{"NegativeOffset",
                st_bytes("{" + entry("a", "F32", "[1]", "[-4,0]") + "}", zeros(4)),
                {"tensor 'a': data_offsets[0] must be a non-negative integer; got -4"}},
        BadFile{"OffsetBeyondInt64",
                st_bytes("{" + entry("a", "F32", "[1]", "[0,18446744073709551616]") + "}", zeros(4)),
                {"data_offsets[1] must be a non-negative integer; got 18446744073709551616"}},
        BadFile{"OffsetNotNumber",
                st_bytes("{" + entry("a", "F32", "[1]", "[0,\"4\"]") + "}", zeros(4)),
                {"data_offsets[1] must be a non-negative integer; got \"4\""}},
        BadFile{"Overlapping",
                st_bytes("{" + entry("a", "F32", "[4]", "[0,16]") + "," + entry("b", "F32", "[4]", "[8,24]") +
                             "}",
                         zeros(24)),
                {"tensors 'a' (bytes [0, 16)) and 'b' (bytes [8, 24)) overlap in the data section"}},
        BadFile{"SameRangeTwice",
                st_bytes("{" + entry("b", "F32", "[4]", "[0,16]") + "," + entry("a", "I32", "[4]", "[0,16]") +
                             "}",
                         zeros(16)),
                {"overlap in the data section"}},
        BadFile{"ContainedBehindANeighbour",
                // c lies inside a even though b (sorted between them) ends before c starts.
                st_bytes("{" + entry("a", "F32", "[8]", "[0,32]") + "," + entry("b", "F32", "[1]", "[4,8]") +
                             "," + entry("c", "F32", "[1]", "[16,20]") + "}",
                         zeros(32)),
                {"tensors 'a' (bytes [0, 32)) and 'b' (bytes [4, 8)) overlap"}},
        // ---- metadata
        BadFile{"MetadataNotObject",
                st_bytes(R"({"__metadata__":"x"})"),
                {"\"__metadata__\" must be an object of strings; got JSON string"}},
        BadFile{"MetadataValueNotString",
                st_bytes(R"({"__metadata__":{"epoch":3}})"),
                {"\"__metadata__\" value for \"epoch\" must be a string; got 3"}}),
    [](const auto& info) { return info.param.name; });

// Files that look unusual but follow the format must open.
TEST(SafeTensorsAccepts, EdgeCasesOfTheFormat) {
  testing::ScratchDir dir;
  struct Good {
    std::string name, bytes;
    std::size_t tensors;
  };
  const Good goods[] = {
      {"no_tensors", st_bytes("{}"), 0},
      {"space_padding", st_bytes("{}      "), 0},
      {"whitespace_everywhere",
       st_bytes(" { \"a\" : { \"dtype\" : \"U8\" , \"shape\" : [ 2 ] , "
                "\"data_offsets\" : [ 0 , 2 ] } } \n\t\r",
                zeros(2)),
       1},
      {"gap_between_tensors",
       st_bytes("{" + entry("a", "U8", "[2]", "[0,2]") + "," + entry("b", "U8", "[2]", "[6,8]") + "}",
                zeros(8)),
       2},
      {"trailing_bytes_after_data", st_bytes("{" + kOne + "}", zeros(12)), 1},
      {"empty_tensors_anywhere",
       st_bytes("{" + entry("a", "F32", "[4]", "[0,16]") + "," + entry("e", "F32", "[0,3]", "[8,8]") + "," +
                    entry("f", "F64", "[5,0]", "[16,16]") + "}",
                zeros(16)),
       3},
      {"unaligned_data_section", st_bytes("{" + entry("a", "F64", "[2]", "[0,16]") + "} ", zeros(16)), 1},
      {"metadata_only", st_bytes(R"({"__metadata__":{"a":"b","":""}})"), 0},
      {"unicode_names", st_bytes("{" + entry("\xc3\xa9\\u00e9", "U8", "[1]", "[0,1]") + "}", zeros(1)), 1},
  };
  for (const Good& g : goods) {
    const std::string path = dir.file(g.name);
    testing::write_bytes(path, g.bytes);
    try {
      const SafeTensorsFile f = SafeTensorsFile::open(path);
      EXPECT_EQ(f.names().size(), g.tensors) << g.name;
      for (const std::string& n : f.names()) {
        const Tensor t = f.load(n, exact_dtype(f.info(n).dtype).value());
        for (double x : t.to_vector()) EXPECT_EQ(x, 0.0) << g.name << " " << n;
      }
    } catch (const Error& e) {
      ADD_FAILURE() << g.name << ": " << e.what();
    }
  }
  const SafeTensorsFile u = SafeTensorsFile::open(dir.file("unicode_names"));
  EXPECT_TRUE(u.contains("\xc3\xa9\xc3\xa9"));  // the \u00e9 escape decoded
  EXPECT_EQ(SafeTensorsFile::open(dir.file("metadata_only")).metadata(), (Metadata{{"a", "b"}, {"", ""}}));
}

TEST(SafeTensorsAccepts, OpenErrorsForPathsThatAreNotFiles) {
  testing::ScratchDir dir;
  try {
    SafeTensorsFile::open(dir.file("missing.safetensors"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot open '" + dir.file("missing.safetensors") + "': No such file"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(SafeTensorsFile::open(dir.path()), Error);  // a directory
}

// Seeded random corruptions of a valid file (byte changes in the length prefix
// and header, truncation, appended bytes): open() and load() either succeed or
// throw attn::Error; under the asan preset any out-of-bounds access fails here.
TEST(SafeTensorsRejects, RandomCorruptionsNeverCrash) {
  testing::ScratchDir dir;
  const std::string good = dir.file("good.safetensors");
  save_safetensors(good,
                   {{"a", testing::random_uniform({3, 4}, 1)},
                    {"b", Tensor::from<int64_t>({1, 2, 3}, {3})},
                    {"c", testing::random_uniform({2}, 2, -1, 1, DType::bf16)},
                    {"e", Tensor::zeros({0, 5})}},
                   {{"k", "v"}});
  const std::string bytes = testing::read_bytes(good);
  const std::size_t header_end = 8 + SafeTensorsFile::open(good).header_size();
  std::mt19937_64 rng(1234);
  const std::string path = dir.file("bad.safetensors");
  int opened = 0, rejected = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    std::string b = bytes;
    switch (trial % 4) {
      case 0:
      case 1: {  // overwrite 1-3 bytes in the prefix or header with interesting values
        const char interesting[] = {'0', '9', '-', '"', ',', '[', ']', '{', '}', ' ', '\0', '\xff', 'e', '.'};
        for (int n = 1 + static_cast<int>(rng() % 3); n > 0; --n)
          b[rng() % header_end] =
              rng() % 2 ? interesting[rng() % sizeof interesting] : static_cast<char>(rng());
        break;
      }
      case 2:
        b.resize(rng() % b.size());
        break;  // truncate anywhere
      case 3:
        b += std::string(1 + rng() % 16, static_cast<char>(rng()));
        break;  // trailing bytes
    }
    testing::write_bytes(path, b);
    try {
      const SafeTensorsFile f = SafeTensorsFile::open(path);
      for (const std::string& n : f.names()) {
        f.load(n, DType::f64);
        f.bytes(n);
      }
      ++opened;
    } catch (const Error& e) {
      ++rejected;
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // Both outcomes must actually occur, or the corruptions test nothing.
  EXPECT_GT(opened, 50);
  EXPECT_GT(rejected, 500);
}

// ---- the committed corpus -------------------------------------------------------

std::string data_file(const std::string& name) { return testing::source_path("tests/io/data/" + name); }

class SafeTensorsCorpus : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(SafeTensorsCorpus, RegressionFileIsRejected) {
  const auto& [file, expected] = GetParam();
  const std::string path = data_file(file + ".safetensors");
  ASSERT_EQ(access(path.c_str(), R_OK), 0)
      << "missing " << path << " (run python/reference/make_safetensors_test_files.py)";
  try {
    SafeTensorsFile::open(path);
    FAIL() << "opened " << path;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, SafeTensorsCorpus,
    ::testing::Values(std::pair{"bad_header_past_end", "header length 4096 runs past the end of the file"},
                      std::pair{"bad_offsets_outside_file",
                                "tensor 'a': data_offsets end 64 is past the end"},
                      std::pair{"bad_overlap", "tensors 'a' (bytes [0, 16)) and 'b' (bytes [8, 24)) overlap"},
                      std::pair{"bad_byte_count", "hold 20 bytes; expected 24"},
                      std::pair{"bad_unknown_dtype", "unknown dtype \"F8_E4M3\""},
                      std::pair{"bad_invalid_utf8", "not valid UTF-8: byte 0xff"},
                      std::pair{"bad_invalid_json", "not valid JSON"},
                      std::pair{"bad_absurd_shape", "more elements than fit in int64"}),
    [](const auto& info) { return info.param.first; });

// Written by the `safetensors` Python package (the format's reference
// implementation); values follow value(i) = (i − 5) · 0.375 from the script.
TEST(SafeTensorsCorpus, ReadsTheReferenceImplementationsFile) {
  const SafeTensorsFile f = SafeTensorsFile::open(data_file("good_reference.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  auto value = [](int64_t i) { return (static_cast<double>(i) - 5) * 0.375; };
  struct Expect {
    const char* name;
    StDType dtype;
    Shape shape;
  };
  const Expect floats[] = {{"f64", StDType::F64, {2, 3}},
                           {"f32", StDType::F32, {3, 4}},
                           {"f16", StDType::F16, {2, 5}},
                           {"bf16", StDType::BF16, {2, 2, 2}}};
  for (const Expect& e : floats) {
    ASSERT_TRUE(f.contains(e.name)) << e.name;
    EXPECT_EQ(f.info(e.name).dtype, e.dtype) << e.name;
    EXPECT_EQ(f.info(e.name).shape, e.shape) << e.name;
    for (DType to : {DType::f32, DType::f64}) {
      const std::vector<double> got = f.load(e.name, to).to_vector();
      ASSERT_EQ(static_cast<int64_t>(got.size()), f.info(e.name).numel);
      for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], value(i)) << e.name << "[" << i << "]";
    }
  }
  const Tensor i64 = f.load("i64", DType::i64);
  ASSERT_EQ(i64.shape(), Shape{5});
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(i64.data<int64_t>()[i], i * 3000000000 - 7);
  const Tensor i32 = f.load("i32", DType::i32);
  EXPECT_EQ(i32.shape(), (Shape{3, 2}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(i32.data<int32_t>()[i], i * 100000 - 7);
  const Tensor u8 = f.load("u8", DType::u8);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(u8.data<uint8_t>()[i], (i * 37) % 256);
  EXPECT_EQ(f.info("bool").dtype, StDType::BOOL);
  const Tensor b = f.load("bool", DType::u8);
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(b.data<uint8_t>()[i], i % 3 == 0 ? 1 : 0);
  EXPECT_EQ(f.info("scalar").shape, Shape{});
  EXPECT_EQ(f.load("scalar").to_vector(), std::vector<double>{value(3)});
  EXPECT_EQ(f.info("empty").shape, (Shape{0, 4}));
  EXPECT_EQ(f.load("empty").numel(), 0);
}

}  // namespace
}  // namespace attn::io
