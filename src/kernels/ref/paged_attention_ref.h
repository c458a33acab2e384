// The oracle of the paged attention (include/attn/ops/paged_attention.h): every score, the softmax
// and P·V in double, reading each key through the block table as the kernels do.
#pragma once

#include "kernels/paged_attention_args.h"

namespace attn::kernels::ref {

void paged_attention(const PagedAttnArgs& a);

}  // namespace attn::kernels::ref
