// The YAML writer: what it writes reads back (with yaml-cpp) as exactly the same values, strings
// that look like numbers or booleans included.
#include "deploy/yaml_text.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace tessera::deploy {
namespace {

using Json = nlohmann::ordered_json;

// YAML back to JSON, keeping scalars' quoting: a quoted scalar is a string.
Json FromYaml(const YAML::Node& n) {
  if (n.IsMap()) {
    Json o = Json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = FromYaml(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    Json a = Json::array();
    for (const auto& x : n) a.push_back(FromYaml(x));
    return a;
  }
  if (n.IsNull()) return nullptr;
  if (n.Tag() == "!") return n.Scalar();  // quoted
  const std::string& s = n.Scalar();
  if (s == "true" || s == "false") return s == "true";
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (...) {
  }
  return s;
}

TEST(YamlTextTest, ValuesReadBackUnchanged) {
  Json v = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "x"}, {"labels", {{"tessera.io/job", "fm"}}}, {"annotations", Json::object()}}},
            {"spec",
             {{"replicas", 3},
              {"ok", true},
              {"tricky", Json::array({"8080", "true", "no", "1e3", "a: b", "# not a comment", "- dash", "", "x\ny",
                                      "quote\"d", "null", "~"})},
              {"empty", Json::array()},
              {"list", Json::array({{{"name", "a"}, {"env", Json::array({{{"name", "K"}, {"value", "1"}}})}},
                                    Json::array({1, 2}),
                                    Json::object()})},
              {"on", "key that YAML 1.1 reads as a boolean"}}}};
  std::string text = ToYaml(v);
  YAML::Node back = YAML::Load(text);
  EXPECT_EQ(FromYaml(back), v) << text;
}

TEST(YamlTextTest, BlockStyleAReviewerCanRead) {
  Json v = {{"kind", "Service"}, {"spec", {{"ports", Json::array({{{"name", "http"}, {"port", 8080}}})}}}};
  EXPECT_EQ(ToYaml(v), "kind: \"Service\"\nspec:\n  ports:\n  - name: \"http\"\n    port: 8080\n");
}

}  // namespace
}  // namespace tessera::deploy
