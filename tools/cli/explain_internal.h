// The worked example of `attn explain` as the viewer's demo (view_demo.cc)
// uses it. It lives in the library now (attn/teach/explain.h); these names
// keep the demo's spelling until the demo moves to the viewing module.
#pragma once

#include <attn/teach/explain.h>

namespace attn::cli::explain {

using teach::default_example;
using teach::Example;
using teach::generated_embedding;
using teach::Mat;
using teach::matmul;

}  // namespace attn::cli::explain
