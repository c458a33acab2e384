// Shared scaffolding of the fused-kernel tests that run a case table on every
// instruction set this CPU has (force_isa) and several thread counts.
#pragma once

#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::testing {

// scalar, avx2, avx512: those that can run here.
inline std::vector<kernels::cpu::Isa> available_isas() {
  using kernels::cpu::Isa;
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (kernels::cpu::isa_available(i)) v.push_back(i);
  return v;
}

// A parameterised fixture over (case, ISA) that restores the thread count and
// the automatic ISA choice after each test.
template <typename Case>
class IsaCaseTest : public ::testing::TestWithParam<std::tuple<Case, kernels::cpu::Isa>> {
 protected:
  void SetUp() override { threads_ = num_threads(); }
  void TearDown() override {
    set_num_threads(threads_);
    kernels::cpu::force_isa(std::nullopt);
  }
  int threads_ = 1;
};

// "<case name>_<isa>" for INSTANTIATE_TEST_SUITE_P.
template <typename Case>
std::string isa_case_name(const ::testing::TestParamInfo<std::tuple<Case, kernels::cpu::Isa>>& info) {
  return std::get<0>(info.param).name + "_" + kernels::cpu::isa_str(std::get<1>(info.param));
}

}  // namespace attn::testing
