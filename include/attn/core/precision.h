// Process-wide precision of fp32 matrix products (like torch.set_float32_matmul_precision).
//
//   highest (default): fp32 products through BLAS, unchanged.
//   bf16: products with at least a few rows (Linear layers, projections, attention-free GEMMs)
//         round both operands to bf16 and accumulate in fp32 on CPUs with AVX512_BF16 — about
//         twice the fp32 throughput, at bf16 input precision (relative error ~2^-9 per operand).
//         Matrix-vector products and CPUs without AVX512_BF16 keep fp32.
//
// The default is ATTN_MATMUL_PRECISION=highest|fp32|bf16 (runtime_config(), attn/core/config.h; an
// unknown value throws attn::Error); set_matmul_precision overrides it.
#pragma once

#include <string_view>

namespace attn {

enum class MatmulPrecision { highest, bf16 };

MatmulPrecision matmul_precision();
void set_matmul_precision(MatmulPrecision p);

// "highest" or "bf16".
const char* matmul_precision_name(MatmulPrecision p);

// "highest" or "fp32" → highest, "bf16" → bf16; anything else throws attn::Error naming the choices.
MatmulPrecision parse_matmul_precision(std::string_view s);

// Forgets set_matmul_precision: the next matmul_precision() is runtime_config().matmul_precision again.
void reset_matmul_precision();

}  // namespace attn
