# Turns the viewer page template into a C++ source file defining
# attn::cli::view::kPageTemplate. Run as:
#   cmake -DIN=page.html -DOUT=view_page.cc -P embed.cmake
file(READ "${IN}" content)
set(delim "ATTN_PAGE_DELIM")
string(FIND "${content}" ")${delim}" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from tools/cli/viewer/page.html by tools/cli/viewer/embed.cmake. Do not edit.\n"
  "#include \"view_internal.h\"\n"
  "namespace attn::cli::view {\n"
  "const char* const kPageTemplate = R\"${delim}(${content})${delim}\";\n"
  "}  // namespace attn::cli::view\n")
file(RENAME "${OUT}.tmp" "${OUT}")
