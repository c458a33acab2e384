// Every differentiable op, table-driven: the f64 backward against central
// finite differences, and the f32 forward and backward (BLAS, fused attention)
// against f64. A new op is new rows in kCases.
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <string>
#include <vector>

#include "autograd/grad_check.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;
using testing::InputSpec;
using testing::OpFn;
using V = std::vector<Tensor>;

struct OpCase {
  std::string name;
  std::vector<InputSpec> inputs;
  OpFn fn;
  testing::Tolerance f32_fwd = tol::kOpsFloatForward;
  testing::Tolerance f32_bwd = tol::kOpsFloatBackward;
};

InputSpec in(Shape s) { return {std::move(s)}; }
InputSpec strided(Shape s) { return {std::move(s), true, true}; }
InputSpec constant(Shape s) { return {std::move(s), false}; }

Tensor ids_i64(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from(v, s); }
Tensor ids_i32(const std::vector<int32_t>& v, const Shape& s) { return Tensor::from(v, s); }

AttentionOptions attn_opts(bool causal, std::optional<double> scale = std::nullopt) {
  AttentionOptions o;
  o.causal = causal;
  o.scale = scale;
  return o;
}

std::vector<OpCase> cases() {
  std::vector<OpCase> c;
  // ---- matmul / linear
  c.push_back({"matmul_2d", {in({3, 4}), in({4, 5})}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back(
      {"matmul_batched", {in({2, 3, 4}), in({2, 4, 5})}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_broadcast_batch", {in({2, 1, 3, 4}), in({3, 4, 2})}, [](const V& x) {
                 return matmul(x[0], x[1]);
               }});
  c.push_back({"matmul_b_rank2", {in({2, 3, 4}), in({4, 5})}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_a_rank2_b_batched", {in({3, 4}), in({2, 4, 5})}, [](const V& x) {
                 return matmul(x[0], x[1]);
               }});
  c.push_back({"matmul_transposed_views", {strided({2, 3, 4}), strided({2, 4, 5})}, [](const V& x) {
                 return matmul(x[0], x[1]);
               }});
  c.push_back({"matmul_k1", {in({3, 1}), in({1, 4})}, [](const V& x) { return matmul(x[0], x[1]); }});
  c.push_back({"matmul_sliced_view", {in({3, 8}), in({4, 5})}, [](const V& x) {
                 return matmul(slice(x[0], 1, 1, 8, 2), x[1]);
               }});
  c.push_back({"linear_bias", {in({2, 3, 4}), in({5, 4}), in({5})}, [](const V& x) {
                 return linear(x[0], x[1], x[2]);
               }});
  c.push_back({"linear_no_bias", {in({3, 4}), in({5, 4})}, [](const V& x) { return linear(x[0], x[1]); }});
  c.push_back({"linear_strided", {strided({3, 4}), strided({5, 4}), strided({5})}, [](const V& x) {
                 return linear(x[0], x[1], x[2]);
               }});
  c.push_back({"linear_const_weight", {in({3, 4}), constant({2, 4}), in({2})}, [](const V& x) {
                 return linear(x[0], x[1], x[2]);
               }});
  // ---- broadcasting arithmetic
  c.push_back({"add_same", {in({2, 3}), in({2, 3})}, [](const V& x) { return add(x[0], x[1]); }});
  c.push_back({"add_bcast_last", {in({2, 3, 4}), in({4})}, [](const V& x) { return add(x[0], x[1]); }});
  c.push_back({"add_bcast_both", {in({2, 1, 4}), in({3, 1})}, [](const V& x) { return x[0] + x[1]; }});
  c.push_back(
      {"add_strided", {strided({3, 4}), strided({3, 4})}, [](const V& x) { return add(x[0], x[1]); }});
  c.push_back({"sub_bcast", {in({3, 1}), in({2, 3, 4})}, [](const V& x) { return sub(x[0], x[1]); }});
  c.push_back({"mul_bcast", {in({2, 3, 4}), in({3, 1})}, [](const V& x) { return mul(x[0], x[1]); }});
  c.push_back({"mul_bcast_strided", {strided({3, 4}), in({1, 4})}, [](const V& x) { return x[0] * x[1]; }});
  c.push_back({"scale", {in({2, 5})}, [](const V& x) { return scale(x[0], -1.7); }});
  c.push_back({"sum_to", {in({2, 3, 4})}, [](const V& x) { return sum_to(x[0], {3, 1}); }});
  // ---- reductions
  c.push_back({"sum_all", {in({2, 3, 4})}, [](const V& x) { return sum(x[0]); }});
  c.push_back({"sum_dim", {in({2, 3, 4})}, [](const V& x) { return sum(x[0], 1); }});
  c.push_back(
      {"sum_dim_keepdim_strided", {strided({2, 3, 4})}, [](const V& x) { return sum(x[0], -1, true); }});
  c.push_back({"mean_all", {in({3, 5})}, [](const V& x) { return mean(x[0]); }});
  c.push_back({"mean_dim", {in({3, 5})}, [](const V& x) { return mean(x[0], 0); }});
  // ---- shape ops
  c.push_back({"reshape_copy", {strided({3, 4})}, [](const V& x) { return reshape(x[0], {2, -1}); }});
  c.push_back({"view", {in({2, 6})}, [](const V& x) { return view(x[0], {3, 2, 2}); }});
  c.push_back({"permute", {in({2, 3, 4})}, [](const V& x) {
                 return mul(permute(x[0], {2, 0, 1}), Tensor::full({4, 2, 3}, 1.5, x[0].dtype()));
               }});
  c.push_back({"transpose", {in({2, 3, 4})}, [](const V& x) { return transpose(x[0], 0, 2); }});
  c.push_back({"slice_step", {in({7, 3})}, [](const V& x) { return slice(x[0], 0, 1, 6, 2); }});
  c.push_back({"concat", {in({2, 3}), strided({2, 2}), in({2, 1})}, [](const V& x) {
                 return concat({x[0], x[1], x[2]}, 1);
               }});
  c.push_back({"concat_reuse", {in({2, 3})}, [](const V& x) { return concat({x[0], x[0]}, 0); }});
  // ---- embeddings and positions
  c.push_back({"embedding_i64", {in({5, 4})}, [](const V& x) {
                 return embedding(ids_i64({0, 3, 3, 4, 1, 0}, {2, 3}), x[0]);
               }});
  c.push_back({"embedding_i32_strided", {strided({6, 3})}, [](const V& x) {
                 return embedding(ids_i32({2, 2, 5}, {3}), x[0]);
               }});
  c.push_back(
      {"learned_positions", {in({8, 4})}, [](const V& x) { return embedding(position_ids(3, 4), x[0]); }});
  c.push_back({"rope_half_split", {in({2, 2, 5, 6})}, [](const V& x) { return rope(x[0]); }});
  c.push_back({"rope_interleaved_offset", {in({1, 3, 4, 8})}, [](const V& x) {
                 return rope(x[0], {RopeLayout::interleaved, 500.0, 7});
               }});
  c.push_back({"rope_half_split_strided_offset", {strided({2, 6, 4})}, [](const V& x) {
                 return rope(x[0], {RopeLayout::half_split, 10000.0, 3});
               }});
  // ---- norms
  c.push_back({"layer_norm", {in({3, 7}), in({7}), in({7})}, [](const V& x) {
                 return layer_norm(x[0], x[1], x[2], 1e-5);
               }});
  c.push_back({"layer_norm_no_affine_strided", {strided({4, 6})}, [](const V& x) {
                 return layer_norm(x[0], Tensor(), Tensor(), 1e-3);
               }});
  c.push_back({"layer_norm_batched_weight_only", {in({2, 3, 5}), in({5})}, [](const V& x) {
                 return layer_norm(x[0], x[1], Tensor());
               }});
  c.push_back({"rms_norm", {in({3, 8}), in({8})}, [](const V& x) { return rms_norm(x[0], x[1], 1e-6); }});
  c.push_back({"rms_norm_no_weight_strided", {strided({4, 5})}, [](const V& x) {
                 return rms_norm(x[0], Tensor(), 1e-5);
               }});
  // ---- activations
  c.push_back({"relu", {in({4, 5})}, [](const V& x) { return relu(x[0]); }});
  c.push_back({"gelu_exact", {{{4, 5}, true, false, -3, 3}}, [](const V& x) { return gelu(x[0]); }});
  c.push_back(
      {"gelu_tanh_strided", {{{4, 5}, true, true, -3, 3}}, [](const V& x) { return gelu(x[0], "tanh"); }});
  c.push_back({"silu", {{{4, 5}, true, false, -4, 4}}, [](const V& x) { return silu(x[0]); }});
  c.push_back({"swiglu", {in({3, 6}), strided({3, 6})}, [](const V& x) { return swiglu(x[0], x[1]); }});
  c.push_back({"dropout_train", {in({4, 8})}, [](const V& x) { return dropout(x[0], 0.3, true, 42); }});
  c.push_back({"dropout_p0_identity", {in({4, 8})}, [](const V& x) { return dropout(x[0], 0.0, true, 42); }});
  c.push_back(
      {"dropout_eval_identity", {in({4, 8})}, [](const V& x) { return dropout(x[0], 0.5, false, 42); }});
  // ---- softmax and losses
  c.push_back({"softmax", {{{3, 7}, true, false, -3, 3}}, [](const V& x) { return softmax(x[0]); }});
  c.push_back({"softmax_strided", {strided({2, 3, 4})}, [](const V& x) { return softmax(x[0]); }});
  c.push_back({"log_softmax", {{{3, 7}, true, false, -3, 3}}, [](const V& x) { return log_softmax(x[0]); }});
  c.push_back({"log_softmax_strided", {strided({5, 4})}, [](const V& x) { return log_softmax(x[0]); }});
  c.push_back({"cross_entropy", {{{4, 6}, true, false, -3, 3}}, [](const V& x) {
                 return cross_entropy(x[0], ids_i64({1, 0, 5, 2}, {4}));
               }});
  c.push_back({"cross_entropy_ignore_index", {{{5, 6}, true, false, -3, 3}}, [](const V& x) {
                 return cross_entropy(x[0], ids_i64({1, -100, 5, -100, 3}, {5}));
               }});
  c.push_back({"cross_entropy_label_smoothing", {{{4, 6}, true, false, -3, 3}}, [](const V& x) {
                 return cross_entropy(x[0], ids_i64({1, 0, 5, 2}, {4}), {-100, 0.1});
               }});
  c.push_back({"cross_entropy_smoothing_ignore_i32_strided", {strided({5, 7})}, [](const V& x) {
                 return cross_entropy(x[0], ids_i32({6, 0, 0, 2, 0}, {5}), {0, 0.25});
               }});
  // ---- attention (f32 goes through the fused kernel, f64 through the reference)
  c.push_back({"attention",
               {in({2, 2, 3, 4}), in({2, 2, 5, 4}), in({2, 2, 5, 4})},
               [](const V& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
               tol::kFusedForward,
               tol::kFusedBackward});
  c.push_back({"attention_gqa_causal_bottom_right",
               {in({1, 4, 3, 4}), in({1, 2, 5, 4}), strided({1, 2, 5, 4})},
               [](const V& x) {
                 AttentionOptions o = attn_opts(true, 0.7);
                 o.align = Align::bottom_right;
                 return scaled_dot_product_attention(x[0], x[1], x[2], o);
               },
               tol::kFusedForward,
               tol::kFusedBackward});
  c.push_back({"attention_dropout",
               {in({1, 2, 4, 4}), in({1, 2, 4, 4}), in({1, 2, 4, 4})},
               [](const V& x) {
                 AttentionOptions o = attn_opts(false);
                 o.dropout_p = 0.25;
                 o.dropout_seed = 9;
                 return scaled_dot_product_attention(x[0], x[1], x[2], o);
               },
               tol::kFusedForward,
               tol::kFusedBackward});
  // ---- compositions: a chain and a diamond through several ops
  c.push_back({"chain_linear_gelu_layer_norm", {in({3, 4}), in({6, 4}), in({6}), in({6})}, [](const V& x) {
                 return layer_norm(gelu(linear(x[0], x[1], x[2])), x[3], Tensor());
               }});
  c.push_back({"diamond_residual", {in({3, 4}), in({4, 4})}, [](const V& x) {
                 const Tensor h = linear(x[0], x[1]);
                 return add(x[0], mul(silu(h), h));
               }});
  return c;
}

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

class OpGrad : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpGrad, BackwardMatchesFiniteDifferencesInF64) {
  const OpCase& c = GetParam();
  EXPECT_TRUE(testing::check_gradients(c.fn, c.inputs, 1234, tol::kFiniteDiff));
}

TEST_P(OpGrad, F32ForwardAndBackwardMatchF64) {
  const OpCase& c = GetParam();
  EXPECT_TRUE(testing::check_f32(c.fn, c.inputs, 99, c.f32_fwd, c.f32_bwd));
}

INSTANTIATE_TEST_SUITE_P(Ops, OpGrad, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<OpCase>& i) { return i.param.name; });

}  // namespace
}  // namespace attn
