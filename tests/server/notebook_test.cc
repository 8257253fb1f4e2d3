// The example notebook (examples/notebook/platform.ipynb) executed by a real Jupyter kernel
// against a real `tessera server`: it submits a distributed PyTorch job with
// tessera.connect().submit(function), receives the cost through a callback while the job runs
// (at least 20 points before it ended), plots it, saves the figure, and loads the trained model
// into a local torch module. Also the notebook client's refusals, from Python.
#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

class NotebookTest : public ApiFixture {
 protected:
  testing::SpawnOptions Python(const std::vector<std::string>& args, const std::string& token) {
    testing::SpawnOptions o;
    o.argv = {"/usr/bin/python3"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = {{"PYTHONPATH", testing::BuildPath("python")}, {"TESSERA_SERVER", url_}, {"TESSERA_TOKEN", token},
             {"TESSERA_CONFIG_DIR", dir_ + "/cfg"},        {"MPLBACKEND", "Agg"},    {"HOME", dir_},
             {"JUPYTER_RUNTIME_DIR", dir_ + "/jupyter"}};
    o.cwd = dir_;
    o.log_path = dir_ + "/python-" + std::to_string(runs_++) + ".log";
    return o;
  }
  int runs_ = 0;
};

TEST_P(NotebookTest, TheExampleNotebookTrainsWatchesThePlotsAndLoadsTheModel) {
  const std::string token = SignUpAndLogin("ada", "correct horse");
  UploadFashionTest(token);
  auto o = Python({std::string(TESSERA_SOURCE_DIR) + "/tests/python/run_notebook.py",
                   std::string(TESSERA_SOURCE_DIR) + "/examples/notebook/platform.ipynb",
                   dir_ + "/executed.ipynb", "800"},
                  token);
  o.env["TESSERA_NOTEBOOK_FIGURE"] = dir_ + "/cost.png";
  // 80 passes of the 10,000 test images: long enough (about 20 s) for the cost to arrive while it
  // trains (each trainer reports it about once a second).
  o.env["TESSERA_NOTEBOOK_PASSES"] = "80";
  o.env["TESSERA_NOTEBOOK_SUMMARY"] = dir_ + "/summary.json";
  // The client's temporary files go here, to check that it leaves none behind.
  const std::string tmp = dir_ + "/tmp";
  std::filesystem::create_directories(tmp);
  o.env["TMPDIR"] = tmp;
  auto p = testing::Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  auto code = (*p)->Wait(std::chrono::seconds(840));
  ASSERT_TRUE(code.has_value()) << (*p)->Output();
  ASSERT_EQ(*code, 0) << (*p)->Output();
  auto text = ReadFile(dir_ + "/summary.json");
  ASSERT_TRUE(text.ok()) << "the notebook wrote no summary";
  Json s = Json::parse(*text);
  EXPECT_EQ(s["state"], "succeeded") << s;
  EXPECT_GE(s["during"].get<int>(), 20)
      << "cost points must arrive while the job runs, not only at its end: " << s;
  EXPECT_GE(s["points"].get<int>(), s["during"].get<int>());
  EXPECT_TRUE(s["loaded"].get<bool>()) << s;
  for (const auto& e : std::filesystem::directory_iterator(tmp)) {
    const std::string f = e.path().filename().string();
    EXPECT_FALSE(f.rfind("tessera-", 0) == 0 && f.find(".tsm") != std::string::npos)
        << "job.load_into() left its download behind: " << e.path();
  }
  EXPECT_EQ(s["parameters"], 784 * 64 + 64 + 64 * 10 + 10);
  // The figure is a PNG of some size.
  auto png = ReadFile(dir_ + "/cost.png");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->substr(1, 3), "PNG");
  EXPECT_GT(png->size(), 5000u);
  // The job's history on the server agrees: every point the notebook saw is there.
  Got m = Call("GET", "/api/v1/jobs/" + s["job"].get<std::string>() + "/metrics", "", token);
  int costs = 0;
  for (const auto& pt : m.body["points"]) costs += pt["type"] == "cost";
  EXPECT_EQ(costs, s["points"].get<int>());
  // Keep the figure for the docs when asked (TESSERA_KEEP_FIGURE=path).
  if (const char* keep = std::getenv("TESSERA_KEEP_FIGURE"))
    std::filesystem::copy_file(dir_ + "/cost.png", keep, std::filesystem::copy_options::overwrite_existing);
}

TEST_P(NotebookTest, TheClientRefusesWithTheServersReasons) {
  const std::string token = SignUpAndLogin("ada", "correct horse");
  const std::string script = R"(
import tessera
p = tessera.connect()
def expect(fn, words):
    try:
        fn()
    except tessera.PlatformError as e:
        assert words in str(e), (words, str(e))
        return
    raise AssertionError("no error for " + words)
expect(lambda: p.submit(dataset="nope", model="mlp"), "no data set 'nope'")
expect(lambda: p.submit(dataset="fm"), "either code")
expect(lambda: p.job("ada-12345678").info(), "no job 'ada-12345678'")
expect(lambda: tessera.connect("http://127.0.0.1:1", "t"), "cannot reach the tessera server")
expect(lambda: tessera.connect(p.url, "forged"), "unknown token")
print("refusals ok")
)";
  std::ofstream(dir_ + "/refusals.py") << script;
  auto p = testing::Subprocess::Spawn(Python({dir_ + "/refusals.py"}, token));
  ASSERT_TRUE(p.ok());
  auto code = (*p)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0) << (*p)->Output();
  EXPECT_NE((*p)->Output().find("refusals ok"), std::string::npos) << (*p)->Output();
}

INSTANTIATE_TEST_SUITE_P(Backends, NotebookTest, ::testing::Values("sqlite"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
