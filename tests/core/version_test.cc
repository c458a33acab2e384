// attn::version() (the linked library) agrees with the header's macros.
#include <attn/version.h>
#include <gtest/gtest.h>

#include <string>

namespace {

TEST(Version, LibraryMatchesHeader) {
  EXPECT_EQ(attn::version(), ATTN_VERSION_STRING);
  const std::string parts = std::to_string(ATTN_VERSION_MAJOR) + "." + std::to_string(ATTN_VERSION_MINOR) +
                            "." + std::to_string(ATTN_VERSION_PATCH);
  EXPECT_EQ(parts, ATTN_VERSION_STRING);
  EXPECT_EQ(ATTN_VERSION, ATTN_VERSION_MAJOR * 10000 + ATTN_VERSION_MINOR * 100 + ATTN_VERSION_PATCH);
}

}  // namespace
