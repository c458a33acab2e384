// Every numeric tolerance the tests use, in one table.
#pragma once

#include "testing/testing.h"

namespace attn::testing::tol {

// fp32 fused kernel against the fp64 reference on inputs in [-1, 1).
inline constexpr Tolerance kFusedForward{2e-5, 2e-4};
// Fused forward on bf16 inputs (AVX512_BF16 path) against the fp64 reference computed from the same
// bf16-rounded inputs: the products are exact, but P is rounded to bf16 (relative error <= 2^-9) for
// P·V, so out may be off by up to 2^-9 · max|v| / (1 − dropout p) (inputs in [-1, 1), p <= 0.3:
// 2.8e-3; measured worst 1.3e-3); lse is not affected (it is checked with kFusedForward).
inline constexpr Tolerance kFusedForwardBf16Out{3e-3, 4e-3};
inline constexpr Tolerance kFusedBackward{1e-4, 1e-3};
// fp32 reference against fp64 reference.
inline constexpr Tolerance kRefFloat{1e-5, 1e-4};
// Differentiable ops (include/attn/ops/basic.h, nn_functional.h) in f32 against
// the same op in f64, inputs in [-1, 1) (a few in [-4, 4)): forward output and
// gradients. fp32 rounding of O(1) values through a few ops, row sums
// accumulated in double, BLAS sgemm for products.
inline constexpr Tolerance kOpsFloatForward{1e-5, 1e-4};
inline constexpr Tolerance kOpsFloatBackward{2e-5, 2e-4};
// Central finite differences in fp64 (step 1e-6) against the analytic gradient.
inline constexpr Tolerance kFiniteDiff{1e-6, 1e-5};
// Quantized-weight products (kernels/cpu/qmatmul.h) in fp32 against the double reference and against
// dequantize-then-sgemm: weights up to ~±2, x in [-1, 1), K <= 1536, sums of up to 1536 fp32 products.
inline constexpr Tolerance kQMatmul{2e-4, 1e-5};
// Int8-activation products (kernels/cpu/qdot.h) against the double reference from the same quantized
// blocks: the block sums are exact integers, only the fp32 scaling and summation of <= 48 block terms
// (|terms| up to ~1e2) round.
inline constexpr Tolerance kQDot{5e-4, 1e-5};
// Engine against PyTorch fp32 fixtures (different summation order). Also whole
// Transformer models layer by layer, loss and gradients (tests/models; worst seen
// 1.9e-6 forward, 3.6e-7 gradients).
inline constexpr Tolerance kTorchParity{1e-5, 1e-4};
// The same fp32 model computed two ways (KV-cache decoding vs the full
// sequence, masked vs perturbed inputs): identical math, but products of
// other shapes may take other BLAS blockings.
inline constexpr Tolerance kKvCache{1e-5, 1e-4};
// Engine (reference, fp64) against PyTorch fp64 fixtures: the same math in
// double, so only accumulated double rounding may differ.
inline constexpr Tolerance kTorchParityF64{1e-12, 1e-10};
// Optimizers (include/attn/train/optim.h) against torch.optim fp32 runs: 10 full-batch
// steps of a 2-layer MLP (tests/train/optim_torch_test.cc); loss curve, clip norms, final
// weights and optimizer state. Forward/backward sums differ in order (BLAS) and Adam's
// m / sqrt(v) carries those gradient differences into every update. Measured worst:
// 1.9e-7 abs, 1.2e-6 rel; the bound leaves 10x.
inline constexpr Tolerance kOptimTorch{2e-6, 2e-5};
// Optimizer updates in fp32 against the same formulas evaluated in double, 3 steps
// (tests/train/optim_test.cc). Measured worst: 1.8e-7 abs.
inline constexpr Tolerance kOptimFormula{1e-6, 1e-5};
// Gradient accumulation: k micro-batches (loss / k each) against one batch of k·b, fp32;
// gradients and weights after 3 SGD-momentum steps (tests/train/trainer_test.cc).
// Measured worst: 6e-8 abs.
inline constexpr Tolerance kAccumulation{1e-6, 1e-5};
// Exact captured weights against reference probabilities.
inline constexpr Tolerance kWeights{1e-6, 1e-4};
// Corpus BLEU (text/bleu.h) against the sacrebleu package on fixed outputs (score 0..100):
// the same integer counts, so only the last bits of log/exp may differ.
inline constexpr Tolerance kBleu{1e-6, 0};
// sgemm_bf16 (kernels/cpu/gemm_bf16.h) against the fp64 product of the same bf16-rounded operands:
// the products are exact, so only fp32 accumulation differs. Bound per element:
// abs + rel · sqrt(K) · (|alpha| Σ_k |a_ik b_kj| + |beta c_ij|).
inline constexpr Tolerance kGemmBf16Accum{1e-30, 2e-6};
// MatmulPrecision::bf16 against fp32 sgemm on the unrounded operands: each operand is off by up to
// 2^-9 relative, each product by up to ~2^-8, so per element abs + rel · (|alpha| Σ_k |a_ik b_kj|).
inline constexpr Tolerance kGemmBf16VsFp32{1e-30, 4.5e-3};

}  // namespace attn::testing::tol
