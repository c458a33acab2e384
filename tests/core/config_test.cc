// The run-time configuration (attn/core/config.h): every ATTN_* variable with its default, the
// values it accepts and the message a bad value gives, through parse_runtime_config over a table
// (no environment changes); the process's runtime_config() in a child process; and the rule that
// only src/core/config.cc reads ATTN_* variables and docs/configuration.md lists them all.
#include <attn/core/config.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/core/tensor.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

RuntimeConfig parse(const Env& env) {
  return parse_runtime_config([&](std::string_view name) -> std::optional<std::string> {
    const auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

TEST(RuntimeConfig, DefaultsWhenNothingIsSet) {
  const RuntimeConfig c = parse({});
  EXPECT_EQ(c.num_threads, std::nullopt);
  EXPECT_EQ(c.spin_us, 50);
  EXPECT_EQ(c.allocator, std::nullopt);
  EXPECT_EQ(c.allocator_cache_mb, 2048);
  EXPECT_EQ(c.matmul_precision, MatmulPrecision::highest);
  EXPECT_EQ(c.isa, std::nullopt);
  EXPECT_EQ(c.gemm_threads, GemmThreads::attn);
  EXPECT_EQ(c.linear_small_m, 48);
  EXPECT_EQ(c.linear_packed, 48);
  EXPECT_EQ(c.data_dir, "");  // unset: data::find_data_dir looks in its default places
  EXPECT_EQ(c.model_dir, "");
  EXPECT_EQ(c, RuntimeConfig{});
}

TEST(RuntimeConfig, EmptyValuesCountAsUnset) {
  Env env;
  for (const std::string& name : runtime_config_variables()) env[name] = "";
  EXPECT_EQ(parse(env), RuntimeConfig{});
}

// The lookup is asked for exactly the listed variables, each once.
TEST(RuntimeConfig, ReadsEveryListedVariableOnce) {
  std::multiset<std::string> asked;
  parse_runtime_config([&](std::string_view name) -> std::optional<std::string> {
    asked.emplace(name);
    return std::nullopt;
  });
  const std::vector<std::string>& names = runtime_config_variables();
  EXPECT_EQ(names.size(), 12u);
  EXPECT_EQ(asked, std::multiset<std::string>(names.begin(), names.end()));
  for (const std::string& n : names) EXPECT_EQ(n.rfind("ATTN_", 0), 0u) << n;
}

struct Good {
  const char* name;
  const char* value;
  std::function<bool(const RuntimeConfig&)> holds;
};

TEST(RuntimeConfig, AcceptedValues) {
  const std::vector<Good> table = {
      {"ATTN_NUM_THREADS", "1", [](const RuntimeConfig& c) { return c.num_threads == 1; }},
      {"ATTN_NUM_THREADS", "8", [](const RuntimeConfig& c) { return c.num_threads == 8; }},
      {"ATTN_NUM_THREADS", "1024", [](const RuntimeConfig& c) { return c.num_threads == 1024; }},
      {"ATTN_NUM_THREADS", "0016", [](const RuntimeConfig& c) { return c.num_threads == 16; }},
      {"ATTN_SPIN_US", "0", [](const RuntimeConfig& c) { return c.spin_us == 0; }},
      {"ATTN_SPIN_US", "2000", [](const RuntimeConfig& c) { return c.spin_us == 2000; }},
      {"ATTN_SPIN_US", "1000000", [](const RuntimeConfig& c) { return c.spin_us == 1000000; }},
      {"ATTN_ALLOCATOR", "caching",
       [](const RuntimeConfig& c) { return c.allocator == AllocatorMode::caching; }},
      {"ATTN_ALLOCATOR", "system",
       [](const RuntimeConfig& c) { return c.allocator == AllocatorMode::system; }},
      {"ATTN_ALLOCATOR_CACHE_MB", "0", [](const RuntimeConfig& c) { return c.allocator_cache_mb == 0; }},
      {"ATTN_ALLOCATOR_CACHE_MB", "4096",
       [](const RuntimeConfig& c) { return c.allocator_cache_mb == 4096; }},
      {"ATTN_MATMUL_PRECISION", "highest",
       [](const RuntimeConfig& c) { return c.matmul_precision == MatmulPrecision::highest; }},
      {"ATTN_MATMUL_PRECISION", "fp32",
       [](const RuntimeConfig& c) { return c.matmul_precision == MatmulPrecision::highest; }},
      {"ATTN_MATMUL_PRECISION", "bf16",
       [](const RuntimeConfig& c) { return c.matmul_precision == MatmulPrecision::bf16; }},
      {"ATTN_ISA", "scalar", [](const RuntimeConfig& c) { return c.isa == IsaLimit::scalar; }},
      {"ATTN_ISA", "avx2", [](const RuntimeConfig& c) { return c.isa == IsaLimit::avx2; }},
      {"ATTN_ISA", "avx512", [](const RuntimeConfig& c) { return c.isa == IsaLimit::avx512; }},
      {"ATTN_GEMM_THREADS", "attn",
       [](const RuntimeConfig& c) { return c.gemm_threads == GemmThreads::attn; }},
      {"ATTN_GEMM_THREADS", "blas",
       [](const RuntimeConfig& c) { return c.gemm_threads == GemmThreads::blas; }},
      {"ATTN_SGEMM", "auto", [](const RuntimeConfig& c) { return c.sgemm == SgemmKernel::automatic; }},
      {"ATTN_SGEMM", "attn", [](const RuntimeConfig& c) { return c.sgemm == SgemmKernel::attn; }},
      {"ATTN_SGEMM", "blas", [](const RuntimeConfig& c) { return c.sgemm == SgemmKernel::blas; }},
      {"ATTN_LINEAR_SMALL_M", "0", [](const RuntimeConfig& c) { return c.linear_small_m == 0; }},
      {"ATTN_LINEAR_SMALL_M", "128", [](const RuntimeConfig& c) { return c.linear_small_m == 128; }},
      {"ATTN_LINEAR_PACKED", "0", [](const RuntimeConfig& c) { return c.linear_packed == 0; }},
      {"ATTN_LINEAR_PACKED", "64", [](const RuntimeConfig& c) { return c.linear_packed == 64; }},
      {"ATTN_DATA_DIR", "/data/sets", [](const RuntimeConfig& c) { return c.data_dir == "/data/sets"; }},
      {"ATTN_DATA_DIR", "rel dir", [](const RuntimeConfig& c) { return c.data_dir == "rel dir"; }},
      {"ATTN_MODEL_DIR", "/models", [](const RuntimeConfig& c) { return c.model_dir == "/models"; }},
  };
  std::set<std::string> covered;
  for (const Good& g : table) {
    const RuntimeConfig c = parse({{g.name, g.value}});
    EXPECT_TRUE(g.holds(c)) << g.name << "=" << g.value;
    covered.insert(g.name);
  }
  const std::vector<std::string>& names = runtime_config_variables();
  EXPECT_EQ(covered, std::set<std::string>(names.begin(), names.end()));
  // All at once.
  const RuntimeConfig all = parse({{"ATTN_NUM_THREADS", "3"},
                                   {"ATTN_SPIN_US", "7"},
                                   {"ATTN_ALLOCATOR", "system"},
                                   {"ATTN_ALLOCATOR_CACHE_MB", "5"},
                                   {"ATTN_MATMUL_PRECISION", "bf16"},
                                   {"ATTN_ISA", "avx2"},
                                   {"ATTN_GEMM_THREADS", "blas"},
                                   {"ATTN_SGEMM", "blas"},
                                   {"ATTN_LINEAR_SMALL_M", "9"},
                                   {"ATTN_LINEAR_PACKED", "10"},
                                   {"ATTN_DATA_DIR", "d"},
                                   {"ATTN_MODEL_DIR", "m"}});
  RuntimeConfig want;
  want.num_threads = 3;
  want.spin_us = 7;
  want.allocator = AllocatorMode::system;
  want.allocator_cache_mb = 5;
  want.matmul_precision = MatmulPrecision::bf16;
  want.isa = IsaLimit::avx2;
  want.gemm_threads = GemmThreads::blas;
  want.sgemm = SgemmKernel::blas;
  want.linear_small_m = 9;
  want.linear_packed = 10;
  want.data_dir = "d";
  want.model_dir = "m";
  EXPECT_EQ(all, want);
}

struct Bad {
  const char* name;
  const char* value;
  const char* message;  // the whole message
};

TEST(RuntimeConfig, BadValuesNameTheVariableTheExpectationAndTheValue) {
  const std::vector<Bad> table = {
      {"ATTN_NUM_THREADS", "100000", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '100000'"},
      {"ATTN_NUM_THREADS", "abc", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got 'abc'"},
      {"ATTN_NUM_THREADS", "0", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '0'"},
      {"ATTN_NUM_THREADS", "-4", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '-4'"},
      {"ATTN_NUM_THREADS", "4 ", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '4 '"},
      {"ATTN_NUM_THREADS", "2.5", "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '2.5'"},
      {"ATTN_NUM_THREADS", "99999999999999999999999",
       "ATTN_NUM_THREADS: expected a whole number in [1, 1024]; got '99999999999999999999999'"},
      {"ATTN_SPIN_US", "-1", "ATTN_SPIN_US: expected a whole number in [0, 1000000]; got '-1'"},
      {"ATTN_SPIN_US", "1000001", "ATTN_SPIN_US: expected a whole number in [0, 1000000]; got '1000001'"},
      {"ATTN_SPIN_US", "50us", "ATTN_SPIN_US: expected a whole number in [0, 1000000]; got '50us'"},
      {"ATTN_ALLOCATOR", "cuda", "ATTN_ALLOCATOR: expected 'caching' or 'system'; got 'cuda'"},
      {"ATTN_ALLOCATOR", "System", "ATTN_ALLOCATOR: expected 'caching' or 'system'; got 'System'"},
      {"ATTN_ALLOCATOR_CACHE_MB", "1e3",
       "ATTN_ALLOCATOR_CACHE_MB: expected a whole number in [0, 1048576]; got '1e3'"},
      {"ATTN_ALLOCATOR_CACHE_MB", "-5",
       "ATTN_ALLOCATOR_CACHE_MB: expected a whole number in [0, 1048576]; got '-5'"},
      {"ATTN_ALLOCATOR_CACHE_MB", "2000000",
       "ATTN_ALLOCATOR_CACHE_MB: expected a whole number in [0, 1048576]; got '2000000'"},
      {"ATTN_MATMUL_PRECISION", "bfloat",
       "ATTN_MATMUL_PRECISION: expected highest, fp32 or bf16; got 'bfloat'"},
      {"ATTN_MATMUL_PRECISION", "fp16", "ATTN_MATMUL_PRECISION: expected highest, fp32 or bf16; got 'fp16'"},
      {"ATTN_ISA", "avx9", "ATTN_ISA: expected scalar, avx2 or avx512; got 'avx9'"},
      {"ATTN_ISA", "AVX2", "ATTN_ISA: expected scalar, avx2 or avx512; got 'AVX2'"},
      {"ATTN_GEMM_THREADS", "openblas", "ATTN_GEMM_THREADS: expected attn or blas; got 'openblas'"},
      {"ATTN_GEMM_THREADS", "4", "ATTN_GEMM_THREADS: expected attn or blas; got '4'"},
      {"ATTN_SGEMM", "openblas", "ATTN_SGEMM: expected auto, attn or blas; got 'openblas'"},
      {"ATTN_LINEAR_SMALL_M", "-1", "ATTN_LINEAR_SMALL_M: expected a whole number in [0, 1000000]; got '-1'"},
      {"ATTN_LINEAR_SMALL_M", "many",
       "ATTN_LINEAR_SMALL_M: expected a whole number in [0, 1000000]; got 'many'"},
      {"ATTN_LINEAR_PACKED", "off", "ATTN_LINEAR_PACKED: expected a whole number in [0, 1000000]; got 'off'"},
      {"ATTN_LINEAR_PACKED", "2000000",
       "ATTN_LINEAR_PACKED: expected a whole number in [0, 1000000]; got '2000000'"},
  };
  std::set<std::string> covered;
  for (const Bad& b : table) {
    std::string message;
    try {
      parse({{b.name, b.value}});
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(message, b.message) << b.name << "=" << b.value;
    covered.insert(b.name);
  }
  // Every variable with a closed set of values has bad-value cases (the two folders take any text).
  std::set<std::string> want;
  for (const std::string& n : runtime_config_variables())
    if (n != "ATTN_DATA_DIR" && n != "ATTN_MODEL_DIR") want.insert(n);
  EXPECT_EQ(covered, want);
}

// The process's configuration: built once, from the environment, the same object on every thread.
TEST(RuntimeConfig, ProcessConfigurationIsTheEnvironmentsAndBuiltOnce) {
  const RuntimeConfig& c = runtime_config();
  EXPECT_EQ(c, parse_runtime_config([](std::string_view name) -> std::optional<std::string> {
              const char* v = std::getenv(std::string(name).c_str());
              return v ? std::optional<std::string>(v) : std::nullopt;
            }));
  std::vector<const RuntimeConfig*> seen(64, nullptr);
  parallel_for(64, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) seen[static_cast<std::size_t>(i)] = &runtime_config();
  });
  for (const RuntimeConfig* p : seen) EXPECT_EQ(p, &c);
}

// Run in a child with a bad value: the library's first use throws attn::Error (no abort), and so
// does the next one.
TEST(RuntimeConfig, BadEnvironmentValueThrowsAtFirstUse) {
  if (const char* child = std::getenv("ATTN_CONFIG_TEST_CHILD")) {
    const std::vector<std::string> parts = {"ATTN_NUM_THREADS", "expected a whole number in [1, 1024]",
                                            std::string("'") + child + "'"};
    EXPECT_ERROR_CONTAINS(runtime_config(), parts);
    EXPECT_ERROR_CONTAINS(num_threads(), parts);
    EXPECT_ERROR_CONTAINS(Tensor::empty({4}), parts);
    return;
  }
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  for (const std::string value : {"abc", "100000"}) {
    const std::string cmd =
        "ATTN_NUM_THREADS=" + value + " ATTN_CONFIG_TEST_CHILD=" + value + " '" + self +
        "' --gtest_filter=RuntimeConfig.BadEnvironmentValueThrowsAtFirstUse >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

// Moved from tests/kernels/gemm_bf16_test.cc (MatmulPrecisionTest.BadValuesThrow): with a bad
// ATTN_MATMUL_PRECISION, the setting and the fp32 GEMM that consults it throw, naming the variable.
TEST(RuntimeConfig, BadMatmulPrecisionThrowsFromTheSettingAndSgemm) {
  if (std::getenv("ATTN_CONFIG_TEST_CHILD") != nullptr) {
    EXPECT_ERROR_CONTAINS(matmul_precision(), {"ATTN_MATMUL_PRECISION", "'bfloat'", "highest, fp32 or bf16"});
    std::vector<float> a(32 * 32, 1.f), b(32 * 32, 1.f), c(32 * 32);
    EXPECT_ERROR_CONTAINS(
        kernels::cpu::sgemm(false, false, 32, 32, 32, 1.f, a.data(), 32, b.data(), 32, 0.f, c.data(), 32),
        {"ATTN_MATMUL_PRECISION"});
    return;
  }
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  const std::string cmd = std::string("ATTN_MATMUL_PRECISION=bfloat ATTN_CONFIG_TEST_CHILD=1 '") + self +
                          "' --gtest_filter=RuntimeConfig.BadMatmulPrecisionThrowsFromTheSettingAndSgemm "
                          ">/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Only src/core/config.cc reads ATTN_* variables: elsewhere in src/ a getenv names a literal
// variable that is not attn's (HOME, PYTHONPATH, ...).
TEST(RuntimeConfig, OnlyConfigReadsAttnVariables) {
  const fs::path src = fs::path(ATTN_SOURCE_DIR) / "src";
  const std::regex call(R"(getenv\s*\()");
  const std::regex literal(R"(getenv\s*\(\s*"([A-Za-z0-9_]*)\")");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    ++files;
    if (entry.path() == src / "core" / "config.cc") continue;
    const std::string text = testing::read_text(entry.path().string());
    const auto calls =
        std::distance(std::sregex_iterator(text.begin(), text.end(), call), std::sregex_iterator());
    int named = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), literal); it != std::sregex_iterator();
         ++it) {
      ++named;
      EXPECT_NE((*it)[1].str().rfind("ATTN_", 0), 0u) << entry.path() << " reads " << (*it)[1].str();
    }
    EXPECT_EQ(calls, named) << entry.path() << ": a getenv whose variable is not a literal";
  }
  EXPECT_GT(files, 50);
}

// docs/configuration.md has a table row for every variable.
TEST(RuntimeConfig, EveryVariableIsDocumented) {
  const std::string doc = testing::read_text(testing::source_path("docs/configuration.md"));
  ASSERT_FALSE(doc.empty());
  for (const std::string& n : runtime_config_variables())
    EXPECT_NE(doc.find("\n| `" + n + "`"), std::string::npos) << n << " has no row in docs/configuration.md";
}

}  // namespace
}  // namespace attn
