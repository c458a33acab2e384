// The JSON reader/writer: valid documents round-trip, every syntax rule fails
// with the byte offset and what was expected, UTF-8 is validated exactly.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace attn::json {
namespace {

TEST(Json, ParsesEveryValueType) {
  const Value v = parse(R"( {"n": null, "t": true, "f": false, "i": -42, "d": 2.5e-3,
                             "s": "a\"b\\c\/d\b\f\n\r\t", "a": [1, [2, {}], []], "o": {"k": "v"}} )");
  ASSERT_TRUE(v.is_object());
  EXPECT_EQ(v.size(), 8u);
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_FALSE(v.at("f").as_bool());
  EXPECT_TRUE(v.at("i").is_integer());
  EXPECT_EQ(v.at("i").as_int64(), -42);
  EXPECT_FALSE(v.at("d").is_integer());
  EXPECT_EQ(v.at("d").as_double(), 2.5e-3);
  EXPECT_EQ(v.at("s").as_string(), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(v.at("a").size(), 3u);
  EXPECT_EQ(v.at("a").at(1).at(0).as_int64(), 2);
  EXPECT_TRUE(v.at("a").at(1).at(1).is_object());
  EXPECT_EQ(v.at("o").at("k").as_string(), "v");
  EXPECT_EQ(v.find("missing"), nullptr);
  // Members keep document order.
  const char* order[] = {"n", "t", "f", "i", "d", "s", "a", "o"};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(v.members()[i].first, order[i]);
}

TEST(Json, IntegersStayExactBeyondDoublePrecision) {
  // 2^53 + 1 is not representable as a double; byte offsets must not round.
  EXPECT_EQ(parse("9007199254740993").as_int64(), 9007199254740993);
  EXPECT_EQ(parse("9223372036854775807").as_int64(), INT64_MAX);
  EXPECT_EQ(parse("-9223372036854775808").as_int64(), INT64_MIN);
  const Value big = parse("9223372036854775808");  // 2^63: a number, not an int64
  EXPECT_TRUE(big.is_number());
  EXPECT_FALSE(big.is_integer());
  EXPECT_EQ(big.as_double(), 9223372036854775808.0);
  EXPECT_THROW(big.as_int64(), Error);
  EXPECT_FALSE(parse("1.0").is_integer());
  EXPECT_FALSE(parse("1e2").is_integer());
  EXPECT_EQ(parse("1E+2").as_double(), 100.0);
  EXPECT_TRUE(std::signbit(parse("-0.0").as_double()));
}

TEST(Json, UnicodeEscapesIncludingSurrogatePairs) {
  EXPECT_EQ(parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xc3\xa9\xe2\x82\xac");  // A é €
  EXPECT_EQ(parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");             // U+1F600
  EXPECT_EQ(parse(R"("\uDBFF\uDFFF")").as_string(), "\xf4\x8f\xbf\xbf");             // U+10FFFF
  EXPECT_EQ(parse(R"("\u0000x")").as_string(), std::string("\0x", 2));
  // Raw UTF-8 passes through unchanged.
  EXPECT_EQ(parse("\"\xf0\x9f\x98\x80 \xc3\xa9\"").as_string(), "\xf0\x9f\x98\x80 \xc3\xa9");
}

TEST(Json, EveryBmpCodePointRoundTripsThroughEscapesAndDump) {
  char buf[16];
  for (uint32_t cp = 1; cp < 0x10000; ++cp) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    std::snprintf(buf, sizeof buf, "\"\\u%04x\"", cp);
    const std::string s = parse(buf).as_string();
    ASSERT_EQ(find_invalid_utf8(s), std::string::npos) << "U+" << std::hex << cp;
    ASSERT_EQ(parse(dump(Value::string(s))).as_string(), s) << "U+" << std::hex << cp;
  }
}

TEST(Json, DumpRoundTrips) {
  const std::string docs[] = {
      R"({"a":[1,-2,3.25,1e+300,-1.5e-300,null,true,false],"b":{"c":"\u0001\"\\"},"":""})",
      R"([[[[]]],{},"x",0,-0.0,0.1,123456789012345678])",
      "\"\xe2\x82\xac\"",
  };
  for (const std::string& d : docs) {
    const Value v = parse(d);
    EXPECT_EQ(parse(dump(v)), v) << d;
    EXPECT_EQ(parse(dump(v, 2)), v) << d;
  }
  // Shortest round-trip doubles.
  EXPECT_EQ(dump(Value::number(0.1)), "0.1");
  EXPECT_EQ(parse(dump(Value::number(1.0 / 3.0))).as_double(), 1.0 / 3.0);
  EXPECT_EQ(dump(parse(R"({"k": [1, "a\nb"]})")), R"({"k":[1,"a\nb"]})");
  EXPECT_EQ(dump(Value::string(std::string("\x1f", 1))), "\"\\u001f\"");
  EXPECT_THROW(Value::number(NAN), Error);
  EXPECT_THROW(Value::number(INFINITY), Error);
  EXPECT_THROW(dump(Value::string("\xff")), Error);  // never writes invalid UTF-8
}

TEST(Json, DumpWithScalarArraysInline) {
  const Value v = parse(R"({"m":[[1,2],[3,4]],"s":["a","b"],"e":[],"o":{},"mix":[1,{"k":[true,null]}]})");
  DumpOptions o;
  o.indent = 2;
  o.scalar_arrays_inline = true;
  EXPECT_EQ(dump(v, o),
            "{\n"
            "  \"m\": [\n"
            "    [1, 2],\n"
            "    [3, 4]\n"
            "  ],\n"
            "  \"s\": [\"a\", \"b\"],\n"
            "  \"e\": [],\n"
            "  \"o\": {},\n"
            "  \"mix\": [\n"
            "    1,\n"
            "    {\n"
            "      \"k\": [true, null]\n"
            "    }\n"
            "  ]\n"
            "}");
  EXPECT_EQ(parse(dump(v, o)), v);
  // Without the flag, or compact, the layout is dump(v, indent)'s.
  o.scalar_arrays_inline = false;
  EXPECT_EQ(dump(v, o), dump(v, 2));
  o.indent = -1;
  o.scalar_arrays_inline = true;
  EXPECT_EQ(dump(v, o), dump(v));
}

TEST(Json, BuildingValues) {
  Value o = Value::object();
  o.set("x", Value::integer(1));
  o.set("y", Value::array({Value::string("a")}));
  o.set("x", Value::integer(2));  // replaces
  EXPECT_EQ(dump(o), R"({"x":2,"y":["a"]})");
  EXPECT_THROW(o.push_back(Value()), Error);
  EXPECT_THROW(o.at("z"), Error);
  EXPECT_THROW(o.at("y").at(1), Error);
  try {
    o.at("x").as_string();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected a value of type string; got number"), std::string::npos)
        << e.what();
  }
}

struct BadDoc {
  std::string name;
  std::string text;
  std::size_t offset;    // byte offset the error must name
  std::string expected;  // substring of the message
};

void PrintTo(const BadDoc& d, std::ostream* os) { *os << d.name; }

class JsonRejects : public ::testing::TestWithParam<BadDoc> {};

TEST_P(JsonRejects, WithOffsetAndExpectation) {
  const BadDoc& d = GetParam();
  try {
    parse(d.text);
    FAIL() << "parsed without error: " << d.text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("at byte " + std::to_string(d.offset) + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find(d.expected), std::string::npos) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Syntax, JsonRejects,
    ::testing::Values(
        BadDoc{"Empty", "", 0, "expected a value"}, BadDoc{"OnlySpace", "  \n", 3, "got end of input"},
        BadDoc{"TrailingComma", R"({"a":1,})", 7, "expected '\"' to start an object key"},
        BadDoc{"TrailingCommaArray", "[1,]", 3, "expected a value"},
        BadDoc{"MissingComma", "[1 2]", 3, "expected ',' or ']'"},
        BadDoc{"MissingColon", R"({"a" 1})", 5, "expected ':'"},
        BadDoc{"UnquotedKey", "{a:1}", 1, "object key; got 'a'"},
        BadDoc{"TrailingGarbage", "{} x", 3, "expected the end of the document"},
        BadDoc{"TwoValues", "1 2", 2, "end of the document"},
        BadDoc{"LeadingZero", "01", 1, "no leading zeros"}, BadDoc{"BareMinus", "-", 1, "expected a digit"},
        BadDoc{"DotWithoutDigits", "1.", 2, "digit after the decimal point"},
        BadDoc{"ExponentWithoutDigits", "1e+", 3, "digit in the exponent"},
        BadDoc{"PlusSign", "+1", 0, "expected a value"}, BadDoc{"NaN", "NaN", 0, "expected a value"},
        BadDoc{"Infinity", "[Infinity]", 1, "expected a value"},
        BadDoc{"HugeNumber", "1e999", 0, "within the range of a double"},
        BadDoc{"BadLiteral", "tru", 0, "expected 'true'"},
        BadDoc{"UpperLiteral", "NULL", 0, "expected a value"},
        BadDoc{"UnclosedString", "\"abc", 4, "to close the string"},
        BadDoc{"UnclosedObject", R"({"a":1)", 6, "expected ',' or '}'"},
        BadDoc{"RawNewlineInString", "\"a\nb\"", 2, "control character"},
        BadDoc{"BadEscape", R"("\x")", 2, "expected one of"},
        BadDoc{"ShortUnicodeEscape", R"("\u12")", 5, "four hex digits"},
        BadDoc{"LoneHighSurrogate", R"("\ud800")", 1, "lone high surrogate"},
        BadDoc{"HighSurrogateThenLetter", R"("\ud800\u0041")", 9, "expected a low surrogate"},
        BadDoc{"LoneLowSurrogate", R"("\udc00")", 1, "lone low surrogate"},
        BadDoc{"DuplicateKey", R"({"a":1,"b":2,"a":3})", 13, "duplicate key \"a\""},
        BadDoc{"Comment", "[1 /* c */]", 3, "expected ',' or ']'"},
        BadDoc{"SingleQuotes", "['a']", 1, "expected a value"},
        BadDoc{"OverlongSlash", "\"\xc0\xaf\"", 1, "valid UTF-8"},
        BadDoc{"OverlongThreeByte", "\"\xe0\x80\xaf\"", 1, "valid UTF-8"},
        BadDoc{"EncodedSurrogate", "\"ab\xed\xa0\x80\"", 3, "valid UTF-8"},
        BadDoc{"AboveU10FFFF", "\"\xf4\x90\x80\x80\"", 1, "valid UTF-8"},
        BadDoc{"LoneContinuation", "\"\x80\"", 1, "valid UTF-8"},
        BadDoc{"TruncatedSequence", "\"\xe2\x82\"", 1, "valid UTF-8"},
        BadDoc{"ByteFF", "\"\xff\"", 1, "valid UTF-8"},
        BadDoc{"Utf8OutsideString", "\xc3\xa9", 0, "byte 0xc3"},
        BadDoc{"TooDeep", std::string(129, '[') + std::string(129, ']'), 128, "nesting of at most 128"}),
    [](const auto& info) { return info.param.name; });

TEST(Json, DepthLimitIsConfigurable) {
  const std::string deep = std::string(10, '[') + std::string(10, ']');
  EXPECT_NO_THROW(parse(deep));
  EXPECT_THROW(parse(deep, {.max_depth = 9}), Error);
  EXPECT_NO_THROW(parse(deep, {.max_depth = 10}));
  // Far past any limit: an error, not a stack overflow.
  EXPECT_THROW(parse(std::string(1000000, '[')), Error);
}

// Issue 40: an error quotes at most a short prefix of the input (a 100,000-digit number gave a 100 KB
// message), cut before a character that would not fit whole.
TEST(Json, ErrorsQuoteAShortPrefixOfTheInput) {
  const auto message = [](const std::string& doc) {
    try {
      parse(doc);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "parsed without error";
    return std::string();
  };
  const std::string number = message("[" + std::string(100000, '9') + "]");
  EXPECT_LT(number.size(), 200u) << number.substr(0, 300);
  EXPECT_NE(number.find("within the range of a double; got " + std::string(40, '9') + "... (100000 bytes)"),
            std::string::npos)
      << number;
  // A duplicate key of 3-byte characters: the quote ends on a character boundary.
  std::string key;
  for (int i = 0; i < 5000; ++i) key += "ç«";  // 猫
  const std::string dup = message("{\"" + key + "\":1,\"" + key + "\":2}");
  EXPECT_LT(dup.size(), 200u);
  EXPECT_EQ(find_invalid_utf8(dup), std::string::npos) << "cut inside a character";
  EXPECT_NE(dup.find("duplicate key"), std::string::npos) << dup;
  EXPECT_NE(dup.find("..."), std::string::npos) << dup;
}

struct Utf8Case {
  std::string bytes;
  std::size_t first_bad;  // npos when valid
};

TEST(Json, FindInvalidUtf8AtTheBoundariesOfEveryRange) {
  const auto ok = std::string::npos;
  const Utf8Case cases[] = {
      {"", ok},
      {"plain ascii \x7f", ok},
      {"\xc2\x80", ok},          // U+0080, smallest 2-byte
      {"\xc1\xbf", 0},           // overlong
      {"\xdf\xbf", ok},          // U+07FF
      {"\xe0\xa0\x80", ok},      // U+0800
      {"\xe0\x9f\xbf", 0},       // overlong
      {"\xed\x9f\xbf", ok},      // U+D7FF
      {"\xed\xa0\x80", 0},       // U+D800 surrogate
      {"\xee\x80\x80", ok},      // U+E000
      {"\xef\xbf\xbf", ok},      // U+FFFF
      {"\xf0\x90\x80\x80", ok},  // U+10000
      {"\xf0\x8f\xbf\xbf", 0},   // overlong
      {"\xf4\x8f\xbf\xbf", ok},  // U+10FFFF
      {"\xf4\x90\x80\x80", 0},   // above U+10FFFF
      {"\xf5\x80\x80\x80", 0},   // invalid lead
      {"ab\xe2\x82", 2},         // truncated at the end
      {"a\xe2\x28\xa1", 1},      // bad continuation
      {"\xc3\xa9\xc3", 2},       // valid then truncated
      {std::string("\0\xc3\xa9", 3), ok},
  };
  for (const Utf8Case& c : cases)
    EXPECT_EQ(find_invalid_utf8(c.bytes), c.first_bad) << ::testing::PrintToString(c.bytes);
}

}  // namespace
}  // namespace attn::json
