// The platform's data sets through a real `tessera server` on each database backend: uploads in
// chunks that resume after the server is killed mid-way, every chunk checked; the importers of
// every kind of input (csv, idx, a list in a tar); a half-finished upload never listed; preview,
// share and delete; and bad input (wrong offsets and digests, unknown formats and fields, an
// archive leaving its directory) refused with a message and nothing stored.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "common/digest.h"
#include "common/files.h"
#include "server/api_fixture.h"

namespace tessera::server {
namespace {

class DatasetsApiTest : public ApiFixture {
 protected:
  // Sends `data` as file `file` of upload `id` from `from`, in chunks of `chunk` bytes.
  void Send(const std::string& id, const std::string& file, const std::string& data, size_t from,
            size_t chunk, const std::string& token, size_t until = std::string::npos) {
    until = std::min(until, data.size());
    for (size_t off = from; off < until; off += chunk) {
      const std::string piece = data.substr(off, std::min(chunk, until - off));
      Got g = Call("PUT", "/api/v1/uploads/" + id + "/files/" + file + "?offset=" + std::to_string(off),
                   piece, token, {{"X-Chunk-SHA256", Sha256Hex(piece)}});
      ASSERT_EQ(g.status, 200) << g.body;
      ASSERT_EQ(g.body["received"], off + piece.size());
    }
  }
  // Waits until the upload leaves "importing"; returns its final state.
  Json WaitImported(const std::string& id, const std::string& token) {
    Json last;
    for (int i = 0; i < 600; ++i) {
      Got g = Call("GET", "/api/v1/uploads/" + id, "", token);
      last = g.body;
      if (g.status == 200 && g.body["state"] != "importing") return g.body;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "upload " << id << " still importing: " << last;
    return last;
  }
  std::string Csv(int rows) {
    std::string s = "label,x,y\n";
    for (int i = 0; i < rows; ++i)
      s += std::to_string(i % 3) + "," + std::to_string(i) + "," + std::to_string(i * 0.5) + "\n";
    return s;
  }
};

TEST_P(DatasetsApiTest, UploadResumesAfterTheServerIsKilledAndTheDataSetChecksOut) {
  const std::string ada = SignUpAndLogin("ada", "correct horse");
  const std::string csv = Csv(20000);
  Got up = Call("POST", "/api/v1/namespaces/ada/uploads",
                Json{{"name", "points"},
                     {"format", "csv"},
                     {"header", true},
                     {"label_column", "label"},
                     {"files", {{"input", {{"size", csv.size()}, {"sha256", Sha256Hex(csv)}}}}}}
                    .dump(),
                ada);
  ASSERT_EQ(up.status, 201) << up.body;
  const std::string id = up.body["id"];
  const size_t chunk = 64 * 1024;
  ASSERT_GT(csv.size(), 3 * chunk);
  Send(id, "input", csv, 0, chunk, ada, 2 * chunk);

  // A chunk that does not match its digest, or at the wrong offset, is refused; nothing moves.
  std::string piece = csv.substr(2 * chunk, chunk);
  Got bad = Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=" + std::to_string(2 * chunk), piece,
                 ada, {{"X-Chunk-SHA256", Sha256Hex("something else")}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body["error"]["message"].get<std::string>().find("does not match its SHA-256"),
            std::string::npos);
  Got skip = Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=" + std::to_string(3 * chunk), piece,
                  ada, {{"X-Chunk-SHA256", Sha256Hex(piece)}});
  EXPECT_EQ(skip.status, 409) << skip.body;
  EXPECT_NE(skip.body["error"]["message"].get<std::string>().find("resume from there"), std::string::npos);
  // Finishing early is refused; the data set is not listed while the upload is under way.
  EXPECT_EQ(Call("POST", "/api/v1/uploads/" + id + "/finish", "", ada).status, 409);
  EXPECT_TRUE(Call("GET", "/api/v1/namespaces/ada/datasets", "", ada).body["datasets"].empty());

  // The server dies mid-upload; the upload resumes from what it counted.
  server_->Kill();
  StartServer();
  Got st = Call("GET", "/api/v1/uploads/" + id, "", ada);
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.body["state"], "receiving");
  const size_t resume = st.body["files"]["input"]["received"];
  EXPECT_EQ(resume, 2 * chunk);
  Send(id, "input", csv, resume, chunk, ada);
  Got fin = Call("POST", "/api/v1/uploads/" + id + "/finish", "", ada);
  ASSERT_EQ(fin.status, 202) << fin.body;
  Json done = WaitImported(id, ada);
  ASSERT_EQ(done["state"], "done") << done;

  Got list = Call("GET", "/api/v1/namespaces/ada/datasets", "", ada);
  ASSERT_EQ(list.body["datasets"].size(), 1u) << list.body;
  EXPECT_EQ(list.body["datasets"][0]["name"], "points");
  EXPECT_EQ(list.body["datasets"][0]["records"], 20000);
  EXPECT_GT(list.body["datasets"][0]["bytes"].get<int64_t>(), 0);
  Got pre = Call("GET", "/api/v1/namespaces/ada/datasets/points/preview?n=3", "", ada);
  ASSERT_EQ(pre.status, 200) << pre.body;
  ASSERT_EQ(pre.body["records"].size(), 3u);
  EXPECT_EQ(pre.body["records"][2]["label"], "2");
  EXPECT_EQ(pre.body["records"][2]["values"], Json::array({2.0, 1.0}));
  // The files of the upload are gone; the data set is on disk as `tessera upload` makes it.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/server/uploads/" + id));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/server/datasets/ada/points/manifest.json"));
}

TEST_P(DatasetsApiTest, IdxAndAListInATarAreImportedAndATarLeavingItsDirectoryIsRefused) {
  const std::string ada = SignUpAndLogin("ada", "correct horse");
  auto images = ReadFile("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
  auto labels = ReadFile("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
  if (!images.ok() || !labels.ok()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Got up =
      Call("POST", "/api/v1/namespaces/ada/uploads",
           Json{{"name", "fmnist-test"},
                {"format", "idx"},
                {"files", {{"images", {{"size", images->size()}}}, {"labels", {{"size", labels->size()}}}}}}
               .dump(),
           ada);
  ASSERT_EQ(up.status, 201) << up.body;
  Send(up.body["id"], "images", *images, 0, 4 << 20, ada);
  Send(up.body["id"], "labels", *labels, 0, 4 << 20, ada);
  ASSERT_EQ(Call("POST", "/api/v1/uploads/" + up.body["id"].get<std::string>() + "/finish", "", ada).status,
            202);
  EXPECT_EQ(WaitImported(up.body["id"], ada)["state"], "done");
  Got info = Call("GET", "/api/v1/namespaces/ada/datasets/fmnist-test", "", ada);
  EXPECT_EQ(info.body["records"], 10000) << info.body;
  Got pre = Call("GET", "/api/v1/namespaces/ada/datasets/fmnist-test/preview?n=1", "", ada);
  EXPECT_EQ(pre.body["records"][0]["shape"], Json::array({28, 28})) << pre.body;
  EXPECT_EQ(pre.body["records"][0]["label_id"], 9);  // the first test image is an ankle boot

  // A list of files in a tar; then a tar whose entry leaves its directory.
  const std::string src = dir_ + "/list-src";
  std::filesystem::create_directories(src + "/img");
  ASSERT_TRUE(WriteFileAtomic(src + "/img/a.txt", "alpha").ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/img/b.txt", "beta").ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/list.txt", "img/a.txt\tfirst\nimg/b.txt\tsecond\n").ok());
  ASSERT_EQ(std::system(("tar -C " + src + " -cf " + dir_ + "/good.tar list.txt img").c_str()), 0);
  ASSERT_EQ(std::system(("tar -C " + src + " -cf " + dir_ +
                         "/evil.tar --transform 's,^img/a.txt,../../escape.txt,' "
                         "list.txt img/a.txt")
                            .c_str()),
            0);
  for (const std::string name : {"good", "evil"}) {
    auto tar = ReadFile(dir_ + "/" + name + ".tar");
    ASSERT_TRUE(tar.ok());
    Got u = Call(
        "POST", "/api/v1/namespaces/ada/uploads",
        Json{{"name", "files-" + name}, {"format", "list"}, {"files", {{"archive", {{"size", tar->size()}}}}}}
            .dump(),
        ada);
    ASSERT_EQ(u.status, 201) << u.body;
    Send(u.body["id"], "archive", *tar, 0, 1 << 20, ada);
    ASSERT_EQ(Call("POST", "/api/v1/uploads/" + u.body["id"].get<std::string>() + "/finish", "", ada).status,
              202);
    Json end = WaitImported(u.body["id"], ada);
    if (name == "good") {
      EXPECT_EQ(end["state"], "done") << end;
    } else {
      EXPECT_EQ(end["state"], "failed") << end;
      EXPECT_NE(end.value("error", "").find("leaves its directory"), std::string::npos) << end;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/server/escape.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/escape.txt"));
  Got pre2 = Call("GET", "/api/v1/namespaces/ada/datasets/files-good/preview", "", ada);
  ASSERT_EQ(pre2.body["records"].size(), 2u) << pre2.body;
  EXPECT_EQ(pre2.body["records"][1]["label"], "second");
  EXPECT_EQ(pre2.body["records"][1]["path"], "img/b.txt");
  Got list = Call("GET", "/api/v1/namespaces/ada/datasets", "", ada);
  EXPECT_EQ(list.body["datasets"].size(), 2u) << list.body;  // the refused one is not a data set
}

TEST_P(DatasetsApiTest, ShareReadOnlyDeleteAndBadInput) {
  const std::string ada = SignUpAndLogin("ada", "correct horse");
  const std::string bob = SignUpAndLogin("bob", "battery staple");
  const std::string csv = Csv(10);
  Got up = Call("POST", "/api/v1/namespaces/ada/uploads",
                Json{{"name", "tiny"},
                     {"format", "csv"},
                     {"header", true},
                     {"files", {{"input", {{"size", csv.size()}}}}}}
                    .dump(),
                ada);
  ASSERT_EQ(up.status, 201) << up.body;
  const std::string id = up.body["id"];
  // Another user cannot see, feed or finish the upload, nor upload into the namespace.
  EXPECT_EQ(Call("GET", "/api/v1/uploads/" + id, "", bob).status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=0", csv, bob,
                 {{"X-Chunk-SHA256", Sha256Hex(csv)}})
                .status,
            404);
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ada/uploads", up.body.dump(), bob).status, 404);
  // Bad input, each refused with what is wrong.
  auto refused = [&](const Json& body, int status, const std::string& says) {
    Got g = Call("POST", "/api/v1/namespaces/ada/uploads", body.dump(), ada);
    EXPECT_EQ(g.status, status) << body << " -> " << g.body;
    EXPECT_NE(g.body["error"]["message"].get<std::string>().find(says), std::string::npos) << g.body;
  };
  refused({{"name", "x"}, {"format", "parquet"}, {"files", {{"input", {{"size", 1}}}}}}, 400,
          "format 'parquet' is unknown");
  refused({{"name", "x"}, {"format", "idx"}, {"files", {{"images", {{"size", 1}}}}}}, 400, "needs 'labels'");
  refused({{"name", "../x"}, {"format", "csv"}, {"files", {{"input", {{"size", 1}}}}}}, 400, "data set");
  refused({{"name", "x"}, {"format", "csv"}, {"files", {{"input", {{"size", 1}}}}}, {"hedaer", true}}, 400,
          "did you mean 'header'");
  refused({{"name", "x"}, {"format", "csv"}, {"files", {{"input", {{"size", -5}}}}}}, 400, "out of range");
  refused({{"name", "tiny"}, {"format", "csv"}, {"files", {{"input", {{"size", 1}}}}}}, 409, "under way");
  Got past = Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=0", csv + "9,9,9\n", ada,
                  {{"X-Chunk-SHA256", Sha256Hex(csv + "9,9,9\n")}});
  EXPECT_EQ(past.status, 400) << past.body;
  EXPECT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/input?offset=0", csv, ada).status,
            400);  // no digest
  EXPECT_EQ(Call("PUT", "/api/v1/uploads/" + id + "/files/labels?offset=0", csv, ada,
                 {{"X-Chunk-SHA256", Sha256Hex(csv)}})
                .status,
            404);
  Send(id, "input", csv, 0, 1 << 20, ada);
  ASSERT_EQ(Call("POST", "/api/v1/uploads/" + id + "/finish", "", ada).status, 202);
  ASSERT_EQ(WaitImported(id, ada)["state"], "done");

  // Shared read-only: bob sees and previews it; he cannot delete it or share it on.
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/bob/datasets/tiny?owner=ada", "", bob).status, 404);
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/datasets/tiny/shares/bob", "", ada).status, 204);
  Got theirs = Call("GET", "/api/v1/namespaces/bob/datasets", "", bob);
  ASSERT_EQ(theirs.body["datasets"].size(), 1u) << theirs.body;
  EXPECT_EQ(theirs.body["datasets"][0]["namespace"], "ada");
  EXPECT_TRUE(theirs.body["datasets"][0]["shared"].get<bool>());
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/bob/datasets/tiny/preview?owner=ada&n=2", "", bob)
                .body["records"]
                .size(),
            2u);
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/bob/datasets/tiny", "", bob).status, 404);
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/ada/datasets/tiny", "", bob).status, 404);
  EXPECT_EQ(Call("PUT", "/api/v1/namespaces/ada/datasets/tiny/shares/bob", "", bob).status, 404);
  Got mine = Call("GET", "/api/v1/namespaces/ada/datasets/tiny", "", ada);
  EXPECT_EQ(mine.body["shared_with"], Json::array({"bob"})) << mine.body;
  // A viewer of ada's namespace reads but does not upload or delete.
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/members/bob", R"({"role":"viewer"})", ada).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/datasets/tiny/preview", "", bob).status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/ada/datasets/tiny", "", bob).status, 403);
  EXPECT_EQ(Call("POST", "/api/v1/namespaces/ada/uploads", up.body.dump(), bob).status, 403);
  // Deleted by its owner: gone for everyone, files too.
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/ada/datasets/tiny", "", ada).status, 204);
  EXPECT_TRUE(Call("GET", "/api/v1/namespaces/bob/datasets", "", bob).body["datasets"].empty());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/server/datasets/ada/tiny"));
  EXPECT_EQ(Call("DELETE", "/api/v1/namespaces/ada/datasets/tiny", "", ada).status, 404);
}

TEST_P(DatasetsApiTest, UploadsDeclaredAtOnceCannotPassTheStorageQuotaTogether) {
  const std::string ada = SignUpAndLogin("ada", "correct horse");
  ASSERT_EQ(Call("PUT", "/api/v1/namespaces/ada/quota", R"({"storage_mb": 1})", ada).status, 200);
  // Three of 400 KB each: each fits 1 MB alone, all three do not.
  std::vector<int> statuses(3);
  std::vector<std::thread> at_once;
  for (int i = 0; i < 3; ++i)
    at_once.emplace_back([&, i] {
      httplib::Client c(url_.substr(url_.find("//") + 2, url_.rfind(':') - url_.find("//") - 2),
                        std::stoi(url_.substr(url_.rfind(':') + 1)));
      auto r = c.Post("/api/v1/namespaces/ada/uploads", {{"Authorization", "Bearer " + ada}},
                      Json{{"name", "part" + std::to_string(i)},
                           {"format", "text"},
                           {"files", {{"input", {{"size", 400 << 10}}}}}}
                          .dump(),
                      "application/json");
      statuses[i] = r ? r->status : 0;
    });
  for (auto& t : at_once) t.join();
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 201), 2)
      << statuses[0] << statuses[1] << statuses[2];
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 429), 1);
  Got again = Call(
      "POST", "/api/v1/namespaces/ada/uploads",
      Json{{"name", "part9"}, {"format", "text"}, {"files", {{"input", {{"size", 300 << 10}}}}}}.dump(), ada);
  EXPECT_EQ(again.status, 429);
  EXPECT_NE(again.body["error"]["message"].get<std::string>().find("its uploads under way 800.0 KiB"),
            std::string::npos)
      << "reserved: " << again.body;
}

TEST_P(DatasetsApiTest, AnUploadThatWouldFillTheDiskIsRefusedBeforeItStarts) {
  server_->Terminate(std::chrono::seconds(10));
  StartServer({"--keep-free-mb", "1000000000"});  // more than any disk here has
  const std::string ada = SignUpAndLogin("ada", "correct horse");
  Got g =
      Call("POST", "/api/v1/namespaces/ada/uploads",
           Json{{"name", "big"}, {"format", "text"}, {"files", {{"input", {{"size", 1000}}}}}}.dump(), ada);
  EXPECT_EQ(g.status, 429) << g.body;
  EXPECT_NE(g.body["error"]["message"].get<std::string>().find("the server's disk has"), std::string::npos)
      << g.body;
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/ada/uploads", "", ada).body["uploads"].size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, DatasetsApiTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tessera::server
