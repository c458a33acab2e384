# Turns a page template into a C++ source file defining attn::viz::kPageTemplate
# (or the variable NAME names; declared in src/viz/page_template.h). Run as:
#   cmake -DIN=page.html -DOUT=viz_page.cc [-DNAME=kExplainTemplate] -P embed.cmake
if(NOT NAME)
  set(NAME kPageTemplate)
endif()
file(READ "${IN}" content)
get_filename_component(in_name "${IN}" NAME)
set(delim "ATTN_PAGE_DELIM")
string(FIND "${content}" ")${delim}" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from src/viz/${in_name} by src/viz/embed.cmake. Do not edit.\n"
  "#include \"viz/page_template.h\"\n"
  "namespace attn::viz {\n"
  "const char* const ${NAME} = R\"${delim}(${content})${delim}\";\n"
  "}  // namespace attn::viz\n")
file(RENAME "${OUT}.tmp" "${OUT}")
