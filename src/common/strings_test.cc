#include "common/strings.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StringsTest, Split) {
  EXPECT_EQ(Split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Split("a,b,,c", ',', false), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_TRUE(Split("", ',').empty());
}

TEST(StringsTest, ParseNumbersNameTheValue) {
  EXPECT_EQ(*ParseInt64("-42", "n"), -42);
  auto bad = ParseInt64("4x", "--pservers");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--pservers"), std::string::npos);
  EXPECT_FALSE(ParseUint64("-1", "n").ok());
  EXPECT_DOUBLE_EQ(*ParseDouble("0.5", "lr"), 0.5);
  EXPECT_FALSE(ParseDouble("", "lr").ok());
}

TEST(StringsTest, HostPort) {
  auto hp = ParseHostPort("127.0.0.1:2379");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 2379);
  EXPECT_FALSE(ParseHostPort("localhost").ok());
  EXPECT_FALSE(ParseHostPort(":1").ok());
  EXPECT_FALSE(ParseHostPort("h:0").ok());
  EXPECT_FALSE(ParseHostPort("h:70000").ok());
  auto eps = ParseEndpoints("http://a:1, b:2");
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(*eps, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_FALSE(ParseEndpoints("").ok());
}

TEST(StringsTest, Names) {
  EXPECT_TRUE(ValidateName("mnist-2.run_1", "job").ok());
  EXPECT_FALSE(ValidateName("", "job").ok());
  EXPECT_FALSE(ValidateName("a/b", "job").ok());
  EXPECT_FALSE(ValidateName(".hidden", "job").ok());
  EXPECT_FALSE(ValidateName(std::string(65, 'a'), "job").ok());
}

TEST(StringsTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(12), "12 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(64.0 * 1024 * 1024), "64.0 MiB");
}

TEST(StringsTest, ClosestFlagFindsTyposExtraWordsAndUniquePrefixes) {
  const std::vector<std::string> flags = {"--run",         "--store",    "--pservers",   "--passes",
                                          "--pserver-cmd", "--trainers", "--trainer-cmd"};
  struct Case {
    const char* typed;
    const char* expected;
  } cases[] = {
      {"--pservrs", "--pservers"},  // a typo
      {"--run-dir", "--run"},       // more words than the flag
      {"--store-path", "--store"},
      {"--trainer-cmd-x", "--trainer-cmd"},  // the longest flag it extends
      {"--pas", ""},                         // too short a prefix to guess
      {"--pass", "--passes"},                // a unique prefix
      {"--pserv", ""},                       // two flags start so: no guess
      {"--model", ""},
      {"--runner", ""},  // not more words: "--run" + "ner"
  };
  for (const auto& c : cases) EXPECT_EQ(ClosestFlag(c.typed, flags), c.expected) << c.typed;
}

TEST(StringsTest, ClosestNameSuggestsOnlyLikelyTypos) {
  const std::vector<std::string> commands = {"local", "status", "pserver", "master", "upload", "download"};
  struct Case {
    const char* typed;
    const char* expected;
  } cases[] = {
      {"locall", "local"},   {"lcoal", "local"},    {"statsu", "status"}, {"psever", "pserver"},
      {"pservr", "pserver"}, {"uplaod", "upload"},  {"local", "local"},   {"x", ""},
      {"train", ""},         {"downlaodd", "download"}, {"lo", ""},     {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(ClosestName(c.typed, commands), c.expected) << c.typed;
}

TEST(StringsTest, ShellQuoteMakesOneWordTheShellGivesBack) {
  EXPECT_EQ(ShellQuote("/usr/bin/tessera"), "/usr/bin/tessera");
  EXPECT_EQ(ShellQuote("10.0.0.1:2379,h:1"), "10.0.0.1:2379,h:1");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's $HOME"), "'it'\\''s $HOME'");
  EXPECT_EQ(ShellQuote("a;rm -rf /"), "'a;rm -rf /'");
}

}  // namespace
}  // namespace tessera
