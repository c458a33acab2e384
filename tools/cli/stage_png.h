// PNG drawings of the explainer's stages for `attn explain --stages --export` (stage_png.cc): the
// library's drawing (viz::Drawing) rasterised with FreeType and a CJK font, written with zlib.
#pragma once

#include <attn/viz/explain_page.h>

#include <string>

namespace attn::cli {

// Whether this build can write PNG (FreeType and zlib were found at configure time).
bool png_supported();
// Rasterises `d` and writes it to `path` as an 8-bit RGB PNG. Chinese is drawn with the first CJK font
// found (ATTN_CJK_FONT, then Noto Sans CJK, WenQuanYi, Source Han Sans in the usual folders); without
// one, CJK characters are drawn as code points (U+5C0F) and *note says so. Throws attn::Error when no
// font at all is found or the file cannot be written.
void write_png(const viz::Drawing& d, const std::string& path, std::string* note);

}  // namespace attn::cli
