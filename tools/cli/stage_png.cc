// See stage_png.h.
#include "stage_png.h"

#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/text/segment.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#if ATTN_CLI_PNG
#include <ft2build.h>
#include FT_FREETYPE_H
#include <zlib.h>
#endif

namespace attn::cli {

#if !ATTN_CLI_PNG

bool png_supported() { return false; }
void write_png(const viz::Drawing&, const std::string&, std::string*) {
  throw Error("this attn was built without FreeType and zlib, so it cannot write PNG (the SVG files are written)");
}

#else

bool png_supported() { return true; }

namespace {

std::string first_file(const std::vector<std::string>& paths) {
  for (const std::string& p : paths)
    if (!p.empty() && std::filesystem::is_regular_file(p)) return p;
  return "";
}

const std::vector<std::string>& cjk_font_paths() {
  static const std::vector<std::string> p = {
      "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
      "/usr/share/fonts/google-noto-cjk/NotoSansCJK-Regular.ttc", "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
      "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc", "/usr/share/fonts/wqy-zenhei/wqy-zenhei.ttc",
      "/usr/share/fonts/opentype/source-han-sans/SourceHanSansSC-Regular.otf"};
  return p;
}

struct Rgb {
  uint8_t r, g, b;
};
Rgb parse(const std::string& hex) {
  ATTN_CHECK(hex.size() == 7 && hex[0] == '#', "png: expected a colour #rrggbb; got '", hex, "'");
  const auto h = [&](int i) { return static_cast<uint8_t>(std::stoi(hex.substr(static_cast<std::size_t>(i), 2), nullptr, 16)); };
  return {h(1), h(3), h(5)};
}

class Canvas {
 public:
  Canvas(int64_t w, int64_t h) : w_(w), h_(h), px_(static_cast<std::size_t>(w * h * 3), 255) {}
  void fill(double x, double y, double w, double h, Rgb c) {
    const int64_t x0 = std::max<int64_t>(0, std::lround(x)), y0 = std::max<int64_t>(0, std::lround(y));
    const int64_t x1 = std::min<int64_t>(w_, std::lround(x + w)), y1 = std::min<int64_t>(h_, std::lround(y + h));
    for (int64_t yy = y0; yy < y1; ++yy)
      for (int64_t xx = x0; xx < x1; ++xx) set(xx, yy, c, 255);
  }
  void set(int64_t x, int64_t y, Rgb c, int a) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_ || a <= 0) return;
    uint8_t* p = &px_[static_cast<std::size_t>((y * w_ + x) * 3)];
    p[0] = static_cast<uint8_t>((c.r * a + p[0] * (255 - a)) / 255);
    p[1] = static_cast<uint8_t>((c.g * a + p[1] * (255 - a)) / 255);
    p[2] = static_cast<uint8_t>((c.b * a + p[2] * (255 - a)) / 255);
  }
  std::string png() const {
    std::vector<uint8_t> raw;
    raw.reserve(static_cast<std::size_t>(h_ * (w_ * 3 + 1)));
    for (int64_t y = 0; y < h_; ++y) {
      raw.push_back(0);  // filter: none
      raw.insert(raw.end(), px_.begin() + y * w_ * 3, px_.begin() + (y + 1) * w_ * 3);
    }
    uLongf zn = compressBound(static_cast<uLong>(raw.size()));
    std::vector<uint8_t> z(zn);
    ATTN_CHECK(compress2(z.data(), &zn, raw.data(), static_cast<uLong>(raw.size()), 6) == Z_OK, "png: compression failed");
    z.resize(zn);
    std::string out("\x89PNG\r\n\x1a\n", 8);
    const auto be32 = [](std::string& s, uint32_t v) {
      for (int i = 3; i >= 0; --i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    };
    const auto chunk = [&](const char* type, const std::string& data) {
      be32(out, static_cast<uint32_t>(data.size()));
      const std::string td = std::string(type, 4) + data;
      out += td;
      be32(out, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(td.data()), static_cast<uInt>(td.size()))));
    };
    std::string ihdr;
    be32(ihdr, static_cast<uint32_t>(w_));
    be32(ihdr, static_cast<uint32_t>(h_));
    ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bits, RGB, deflate, no filter choice, no interlace
    chunk("IHDR", ihdr);
    chunk("IDAT", std::string(z.begin(), z.end()));
    chunk("IEND", "");
    return out;
  }

 private:
  int64_t w_, h_;
  std::vector<uint8_t> px_;
};

class Fonts {
 public:
  explicit Fonts(std::string* note) {
    ATTN_CHECK(FT_Init_FreeType(&lib_) == 0, "png: FreeType did not start");
    const char* env = std::getenv("ATTN_CJK_FONT");
    std::vector<std::string> cjk = cjk_font_paths();
    if (env && *env) cjk.insert(cjk.begin(), env);
    const std::string c = first_file(cjk);
    const std::string latin = first_file({"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                                          "/usr/share/fonts/dejavu/DejaVuSans.ttf",
                                          "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"});
    if (!c.empty()) FT_New_Face(lib_, c.c_str(), 0, &cjk_);
    if (!latin.empty()) FT_New_Face(lib_, latin.c_str(), 0, &latin_);
    if (!cjk_) {
      std::string where;
      for (const std::string& p : cjk) where += "\n  " + p;
      if (note)
        *note = "no CJK font found, so Chinese characters are drawn as code points (U+5C0F); install one (e.g. "
                "fonts-noto-cjk) or set ATTN_CJK_FONT. Looked in:" + where;
    }
    ATTN_CHECK(cjk_ || latin_, "png: no font found (a CJK font such as fonts-noto-cjk, or DejaVu Sans)");
  }
  ~Fonts() {
    if (cjk_) FT_Done_Face(cjk_);
    if (latin_) FT_Done_Face(latin_);
    FT_Done_FreeType(lib_);
  }
  bool has_cjk() const { return cjk_ != nullptr; }

  void draw(Canvas& cv, const viz::DrawItem& t) {
    std::u32string s = text::decode_utf8(t.s);
    if (!cjk_) {  // the viewer's degrade: CJK characters as their code points
      std::u32string o;
      for (char32_t c : s) {
        if (!text::is_cjk(c)) {
          o += c;
          continue;
        }
        char b[16];
        std::snprintf(b, sizeof b, "U+%04X", static_cast<unsigned>(c));
        for (const char* p = b; *p; ++p) o += static_cast<char32_t>(*p);
      }
      s = o;
    }
    const Rgb col = parse(t.fill);
    double pen = t.x;
    for (char32_t c : s) {
      FT_Face f = cjk_ && FT_Get_Char_Index(cjk_, c) ? cjk_ : latin_ && FT_Get_Char_Index(latin_, c) ? latin_ : (cjk_ ? cjk_ : latin_);
      FT_Set_Pixel_Sizes(f, 0, static_cast<FT_UInt>(std::max(6.0, t.size)));
      if (FT_Load_Char(f, c, FT_LOAD_RENDER) != 0) continue;
      const FT_GlyphSlot g = f->glyph;
      const int64_t ox = std::lround(pen) + g->bitmap_left, oy = std::lround(t.y) - g->bitmap_top;
      for (unsigned r = 0; r < g->bitmap.rows; ++r)
        for (unsigned q = 0; q < g->bitmap.width; ++q) {
          const int a = g->bitmap.buffer[r * static_cast<unsigned>(g->bitmap.pitch) + q];
          cv.set(ox + q, oy + r, col, a);
          if (t.bold) cv.set(ox + q + 1, oy + r, col, a);
        }
      pen += static_cast<double>(g->advance.x) / 64.0;
    }
  }

 private:
  FT_Library lib_ = nullptr;
  FT_Face cjk_ = nullptr, latin_ = nullptr;
};

}  // namespace

void write_png(const viz::Drawing& d, const std::string& path, std::string* note) {
  ATTN_CHECK(d.width > 0 && d.height > 0 && d.width <= 20000 && d.height <= 20000, "png: a drawing of ", d.width,
             " x ", d.height, " pixels; expected 1..20000 each");
  Canvas cv(d.width, d.height);
  Fonts fonts(note);
  for (const viz::DrawItem& it : d.items)
    if (!it.text) cv.fill(it.x, it.y, it.w, it.h, parse(it.fill));
  for (const viz::DrawItem& it : d.items)
    if (it.text) fonts.draw(cv, it);
  io::write_file_atomically(path, cv.png(), "explain --export");
}

#endif

}  // namespace attn::cli
