// --set FIELD=VALUE over a spec: the field changes as if the file had it, everything else stays,
// and a malformed setting is refused naming it.
#include "spec/spec_settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera::spec {
namespace {

const char* kSpec = R"(name: one
pservers: 2
train:
  dataset: fm
  model: mlp
  model_args: [hidden=16]
  passes: 2
  checkpoint_every: 0
store: {path: /data}
)";

JobSpec Parsed(const std::vector<std::string>& settings) {
  auto text = ApplySettings(kSpec, settings, "job.yaml");
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  auto s = ParseJobSpec(*text, "job.yaml");
  EXPECT_TRUE(s.ok()) << s.status() << "\n" << *text;
  return s.ok() ? *s : JobSpec{};
}

TEST(SpecSettingsTest, NoSettingsLeaveTheTextAlone) {
  auto text = ApplySettings(kSpec, {}, "job.yaml");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, kSpec);
}

TEST(SpecSettingsTest, ASettingChangesItsFieldOnly) {
  JobSpec before = Parsed({}), after = Parsed({"train.passes=5"});
  EXPECT_EQ(before.passes, 2);
  EXPECT_EQ(after.passes, 5);
  EXPECT_EQ(after.pservers, 2);
  EXPECT_EQ(after.model_args, std::vector<std::string>{"hidden=16"});
  EXPECT_EQ(after.store.path, "/data");
}

TEST(SpecSettingsTest, ValuesAreYaml) {
  JobSpec s = Parsed({"train.model_args=[hidden=32, layers=2]", "train.optimizer=sgd:lr=0.5",
                      "store={path: /x, claim: fm-data}", "name=two"});
  EXPECT_EQ(s.model_args, (std::vector<std::string>{"hidden=32", "layers=2"}));
  EXPECT_EQ(s.optimizer, "sgd:lr=0.5");
  EXPECT_EQ(s.store.path, "/x");
  EXPECT_EQ(s.store.claim, "fm-data");
  EXPECT_EQ(s.name, "two");
}

TEST(SpecSettingsTest, MissingMappingsAreMadeAndLaterSettingsWin) {
  JobSpec s = Parsed({"checkpoints.path=/ckpt", "train.checkpoint_every=2", "checkpoints.path=/c2"});
  EXPECT_EQ(s.checkpoints.path, "/c2");
  EXPECT_TRUE(s.keeps_checkpoints());
}

TEST(SpecSettingsTest, MistakesAreRefusedNamingTheSetting) {
  for (const auto& [setting, says] : std::initializer_list<std::pair<const char*, const char*>>{
           {"train.passes", "expected FIELD=VALUE"},
           {"=3", "keys joined by dots"},
           {"train..passes=3", "keys joined by dots"},
           {"train.pas ses=3", "keys joined by dots"},
           {"name.first=x", "name is a value in the spec"},
           {"train.model_args=[unclosed", "not valid YAML"}}) {
    auto text = ApplySettings(kSpec, {setting}, "job.yaml");
    ASSERT_FALSE(text.ok()) << setting;
    EXPECT_NE(text.status().message().find(std::string("--set ") + setting), std::string::npos)
        << text.status();
    EXPECT_NE(text.status().message().find(says), std::string::npos) << text.status();
  }
}

TEST(SpecSettingsTest, AnUnknownFieldIsRefusedByTheParserByName) {
  auto text = ApplySettings(kSpec, {"train.pases=3"}, "job.yaml");
  ASSERT_TRUE(text.ok());
  auto s = ParseJobSpec(*text, "job.yaml (with --set)");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("pases"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("with --set"), std::string::npos) << s.status();
}

TEST(SpecSettingsTest, LoadSpecFileChecksTheSpecWithItsSettings) {
  const std::string path = ::testing::TempDir() + "/settings_job.yaml";
  std::ofstream(path) << "name: one\ntrain: {dataset: fm, model: mlp, checkpoint_every: 0}\n";
  // A cluster needs the store; a setting can give it, as the refusal says.
  auto without = LoadSpecFile(path, {});
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find("--set store.path="), std::string::npos) << without.status();
  auto f = LoadSpecFile(path, {"store.path=/data"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->spec.store.path, "/data");
  EXPECT_NE(f->text.find("/data"), std::string::npos);
  EXPECT_TRUE(LoadSpecFile(path, {}, Where::kThisMachine).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tessera::spec
