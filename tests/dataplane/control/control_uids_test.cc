// --control-allowed-uids: a comma-separated list of decimal UIDs; anything else is refused with
// an error naming the text.

#include <sys/types.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/control_server.h"

namespace tidegate::dataplane::control {
namespace {

TEST(ControlAllowedUids, ParsesListsOfDecimalUids) {
  struct Case {
    std::string text;
    std::vector<uid_t> want;
  };
  for (const Case& c : std::vector<Case>{
           {"", {}},
           {"0", {0}},
           {"65532", {65532}},
           {"1000,65534", {1000, 65534}},
           {"4294967294", {4294967294u}},
       }) {
    std::vector<uid_t> got = {99};
    std::string error;
    EXPECT_TRUE(parse_uid_list(c.text, &got, &error)) << c.text << ": " << error;
    EXPECT_EQ(got, c.want) << c.text;
  }
}

TEST(ControlAllowedUids, RefusesAnythingElse) {
  for (const std::string text : {"abc", "1,,2", "1,", ",1", "-1", "+1", " 1", "1 ", "4294967295",
                                 "99999999999999999999", "0x10", "1;2"}) {
    std::vector<uid_t> got;
    std::string error;
    EXPECT_FALSE(parse_uid_list(text, &got, &error)) << text;
    EXPECT_NE(error.find(text), std::string::npos) << text << ": " << error;
  }
}

}  // namespace
}  // namespace tidegate::dataplane::control
