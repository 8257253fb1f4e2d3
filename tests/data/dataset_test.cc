// Data sets through the `tessera` command: upload and download of the real Fashion-MNIST and King
// James Bible give back exactly the input; list, csv and libsvm round trips; refusing to
// overwrite; a killed upload leaves nothing that looks like a data set; corruption is named; bad
// input is refused with where it went wrong.
#include "dataset/dataset.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "data/data_fixture.h"
#include "harness/wait.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
const std::string kFmnist = "/usr/share/datasets/fashion-mnist/";

std::string Gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, n);
  gzclose(f);
  return out;
}

class DatasetTest : public TempDirTest {
 protected:
  std::string store() const { return dir_ + "/store"; }
};

TEST_F(DatasetTest, FashionMnistRoundTripIsByteIdentical) {
  auto up = Tessera({"upload", "--store", store(), "--dataset", "fmnist", "--format", "idx", "--images",
                     kFmnist + "train-images-idx3-ubyte.gz", "--labels",
                     kFmnist + "train-labels-idx1-ubyte.gz", "--parts", "3"});
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_NE(up.out.find("uploaded 60000 records"), std::string::npos) << up.out;
  auto m = dataset::LoadManifest(store() + "/fmnist");
  ASSERT_TRUE(m.ok());
  EXPECT_GT(m->chunks.size(), 30u);  // ~1 MiB chunks: many tasks even for a small data set
  EXPECT_EQ(m->meta["rows"], 28);
  auto down = Tessera({"download", "--store", store(), "--dataset", "fmnist", "--out", dir_ + "/out"});
  ASSERT_EQ(down.code, 0) << down.out;
  EXPECT_TRUE(*ReadFile(dir_ + "/out/images-idx3-ubyte") == Gunzip(kFmnist + "train-images-idx3-ubyte.gz"));
  EXPECT_TRUE(*ReadFile(dir_ + "/out/labels-idx1-ubyte") == Gunzip(kFmnist + "train-labels-idx1-ubyte.gz"));
}

TEST_F(DatasetTest, KingJamesBibleRoundTripIsIdentical) {
  std::string bible = dir_ + "/bible.txt";
  ASSERT_EQ(std::system(("/usr/bin/bible -f Gen1:1-Rev22:21 > " + bible).c_str()), 0);
  auto text = ReadFile(bible);
  ASSERT_TRUE(text.ok());
  ASSERT_GT(text->size(), 4000000u);
  auto up = Tessera({"upload", "--store", store(), "--dataset", "kjv", "--format", "text", "--input", bible,
                     "--chunk-size", "65536", "--parts", "4"});
  ASSERT_EQ(up.code, 0) << up.out;
  auto down = Tessera({"download", "--store", store(), "--dataset", "kjv", "--out", dir_ + "/kjv.txt"});
  ASSERT_EQ(down.code, 0) << down.out;
  EXPECT_TRUE(*ReadFile(dir_ + "/kjv.txt") == *text);
  auto ls = Tessera({"dataset", "ls", "--store", store()});
  EXPECT_NE(ls.out.find("kjv"), std::string::npos);
  EXPECT_NE(ls.out.find("31102"), std::string::npos) << ls.out;
  auto info = Tessera({"dataset", "info", "--store", store(), "--dataset", "kjv"});
  EXPECT_NE(info.out.find("format       text"), std::string::npos) << info.out;
}

TEST_F(DatasetTest, ListCsvAndLibsvmRoundTrip) {
  // list: files with their labels
  fs::create_directories(dir_ + "/files/a");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/files/a/one.bin", std::string("\x00\x01\x02", 3)).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/files/two.txt", "hello").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/files/list.txt", "a/one.bin\tcat\ntwo.txt\tdog\n").ok());
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "l", "--format", "list", "--input",
                     dir_ + "/files/list.txt"})
                .code,
            0);
  ASSERT_EQ(Tessera({"download", "--store", store(), "--dataset", "l", "--out", dir_ + "/lout"}).code, 0);
  EXPECT_EQ(*ReadFile(dir_ + "/lout/list.txt"), "a/one.bin\tcat\ntwo.txt\tdog\n");
  EXPECT_EQ(*ReadFile(dir_ + "/lout/a/one.bin"), std::string("\x00\x01\x02", 3));
  EXPECT_EQ(*ReadFile(dir_ + "/lout/two.txt"), "hello");
  // csv with a header and the label in the middle
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/d.csv", "x,y,label,z\n1,2.5,yes,-3\n0.125,4,no,1e3\n").ok());
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "c", "--format", "csv", "--input",
                     dir_ + "/d.csv", "--header", "--label-column", "label"})
                .code,
            0);
  ASSERT_EQ(Tessera({"download", "--store", store(), "--dataset", "c", "--out", dir_ + "/c.csv"}).code, 0);
  EXPECT_EQ(*ReadFile(dir_ + "/c.csv"), "x,y,label,z\n1,2.5,yes,-3\n0.125,4,no,1000\n");
  // libsvm, with a comment and a blank line
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/d.svm", "1 3:0.5 17:1\n# comment\n\n-1 2:2\n").ok());
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "s", "--format", "libsvm", "--input",
                     dir_ + "/d.svm"})
                .code,
            0);
  ASSERT_EQ(Tessera({"download", "--store", store(), "--dataset", "s", "--out", dir_ + "/s.svm"}).code, 0);
  EXPECT_EQ(*ReadFile(dir_ + "/s.svm"), "1 3:0.5 17:1\n-1 2:2\n");
  // raw: length-prefixed records
  ASSERT_EQ(
      Tessera({"download", "--store", store(), "--dataset", "s", "--format", "raw", "--out", dir_ + "/s.raw"})
          .code,
      0);
  EXPECT_GT(ReadFile(dir_ + "/s.raw")->size(), 8u);
}

TEST_F(DatasetTest, RefusesToOverwriteUnlessForced) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.txt", "one\ntwo\n").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/b.txt", "three\n").ok());
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "t", "--format", "text", "--input",
                     dir_ + "/a.txt"})
                .code,
            0);
  auto again = Tessera(
      {"upload", "--store", store(), "--dataset", "t", "--format", "text", "--input", dir_ + "/b.txt"});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("already exists"), std::string::npos) << again.out;
  EXPECT_EQ(dataset::LoadManifest(store() + "/t")->records, 2);
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "t", "--format", "text", "--input",
                     dir_ + "/b.txt", "--force"})
                .code,
            0);
  EXPECT_EQ(dataset::LoadManifest(store() + "/t")->records, 1);
  // Nothing left behind by the replacement.
  for (const auto& e : fs::directory_iterator(store()))
    EXPECT_EQ(e.path().filename().string()[0] != '.', true);
}

// All records of a data set, in chunk order, through a reader opened now.
std::vector<std::string> AllRecords(dataset::DatasetReader& r) {
  std::vector<std::string> out;
  std::vector<std::string_view> recs;
  for (size_t c = 0; c < r.manifest().chunks.size(); ++c) {
    EXPECT_TRUE(r.ReadChunk(c, &recs).ok());
    out.insert(out.end(), recs.begin(), recs.end());
  }
  return out;
}

TEST_F(DatasetTest, AppendAddsRecordsAfterTheOldOnesAndDisturbsNoReader) {
  std::string a, b;
  for (int i = 0; i < 3000; ++i) a += "a" + std::to_string(i) + "\n";
  for (int i = 0; i < 2000; ++i) b += "b" + std::to_string(i) + "\n";
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.txt", a).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/b.txt", b).ok());
  auto up = [&](const std::string& in, std::vector<std::string> extra) {
    std::vector<std::string> args = {"upload", "--store", store(), "--dataset",    "t",   "--format",
                                     "text",   "--input", in,      "--chunk-size", "4096"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Tessera(args);
  };
  // Appending to nothing is refused with the way out.
  auto none = up(dir_ + "/b.txt", {"--append"});
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.out.find("upload it first without --append"), std::string::npos) << none.out;
  ASSERT_EQ(up(dir_ + "/a.txt", {}).code, 0);
  auto before = dataset::DatasetReader::Open(store(), "t");
  ASSERT_TRUE(before.ok());
  const auto old_records = AllRecords(**before);
  ASSERT_EQ(old_records.size(), 3000u);

  auto more = up(dir_ + "/b.txt", {"--append", "--parts", "2"});
  ASSERT_EQ(more.code, 0) << more.out;
  EXPECT_NE(more.out.find("appended 2000 records"), std::string::npos) << more.out;
  EXPECT_NE(more.out.find("now 5000 records"), std::string::npos) << more.out;
  // The reader opened before reads what it read before; a new one reads the old records, then
  // the new ones in their order.
  EXPECT_EQ(AllRecords(**before), old_records);
  auto after = dataset::DatasetReader::Open(store(), "t");
  ASSERT_TRUE(after.ok());
  auto all = AllRecords(**after);
  ASSERT_EQ(all.size(), 5000u);
  EXPECT_TRUE(std::equal(old_records.begin(), old_records.end(), all.begin()));
  EXPECT_EQ(all[3000], "b0");
  EXPECT_EQ(all[4999], "b1999");
  EXPECT_EQ((*after)->manifest().parts, 4 + 2);
  // A small append adds only the parts it fills.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/c.txt", "c0\n").ok());
  ASSERT_EQ(up(dir_ + "/c.txt", {"--append"}).code, 0);
  EXPECT_EQ(dataset::LoadManifest(store() + "/t")->parts, 4 + 2 + 1);
  EXPECT_FALSE(fs::exists(store() + "/t/" + dataset::Manifest::PartName(7)));
  EXPECT_EQ(dataset::LoadManifest(store() + "/t")->records, 5001);

  // Another format, or --force with --append: refused, nothing changed.
  auto csv = Tessera({"upload", "--store", store(), "--dataset", "t", "--format", "csv", "--input",
                      dir_ + "/b.txt", "--append"});
  EXPECT_EQ(csv.code, 1);
  EXPECT_NE(csv.out.find("was uploaded with --format text"), std::string::npos) << csv.out;
  auto both = up(dir_ + "/b.txt", {"--append", "--force"});
  EXPECT_EQ(both.code, 1);
  EXPECT_NE(both.out.find("give one"), std::string::npos) << both.out;
  EXPECT_EQ(dataset::LoadManifest(store() + "/t")->records, 5001);

  // An append that fails half-way (a missing input file after a good one is not possible with
  // one --input, so: a writer dropped without Commit) leaves the data set as it was and no files.
  {
    dataset::WriterOptions wo;
    wo.append = true;
    auto w = dataset::DatasetWriter::Create(store(), "t", "text", "line", wo);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Add("never").ok());
    // While it is open, a second append is refused.
    auto busy = up(dir_ + "/b.txt", {"--append"});
    EXPECT_EQ(busy.code, 1);
    EXPECT_NE(busy.out.find("appending to data set 't' right now"), std::string::npos) << busy.out;
  }
  auto last = dataset::DatasetReader::Open(store(), "t");
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(AllRecords(**last).size(), 5001u);
  for (const auto& e : fs::directory_iterator(store() + "/t"))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << e.path();
}

TEST_F(DatasetTest, KilledUploadLeavesNoDataSetThatLooksWhole) {
  // A big input and tiny chunks make the upload take a while.
  std::string big = dir_ + "/big.txt";
  {
    std::ofstream f(big);
    for (int i = 0; i < 400000; ++i) f << "line " << i << " of a large input that takes a moment to store\n";
  }
  SpawnOptions o;
  o.argv = {BuildPath("src/tessera"),
            "upload",
            "--store",
            store(),
            "--dataset",
            "big",
            "--format",
            "text",
            "--input",
            big,
            "--chunk-size",
            "1024",
            "--compressor",
            "none"};
  o.log_path = dir_ + "/killed.log";
  auto p = Subprocess::Spawn(o);
  ASSERT_TRUE(p.ok());
  // Kill it once it has started writing.
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::error_code ec;
        if (!fs::is_directory(store(), ec)) return false;
        for (const auto& e : fs::directory_iterator(store(), ec)) {
          if (e.path().filename().string().rfind(".tmp-big", 0) == 0) return true;
        }
        return false;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(5)));
  (*p)->Kill();
  EXPECT_FALSE(fs::exists(store() + "/big"));
  auto ls = Tessera({"dataset", "ls", "--store", store()});
  EXPECT_NE(ls.out.find("no data sets"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("1 unfinished upload"), std::string::npos) << ls.out;
  EXPECT_EQ(dataset::DatasetReader::Open(store(), "big").status().code(), StatusCode::kNotFound);
}

TEST_F(DatasetTest, CorruptChunkIsNamedOnDownload) {
  ASSERT_TRUE(
      WriteFileAtomic(dir_ + "/a.txt", std::string(200000, 'a') + "\n" + std::string(200000, 'b') + "\n")
          .ok());
  ASSERT_EQ(Tessera({"upload", "--store", store(), "--dataset", "t", "--format", "text", "--input",
                     dir_ + "/a.txt", "--chunk-size", "150000", "--compressor", "none"})
                .code,
            0);
  auto m = dataset::LoadManifest(store() + "/t");
  ASSERT_TRUE(m.ok());
  ASSERT_GE(m->chunks.size(), 2u);
  std::string part = store() + "/t/" + dataset::Manifest::PartName(m->chunks[1].part);
  auto bytes = ReadFile(part);
  (*bytes)[m->chunks[1].offset + 100] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomic(part, *bytes).ok());
  auto down = Tessera({"download", "--store", store(), "--dataset", "t", "--out", dir_ + "/o.txt"});
  EXPECT_EQ(down.code, 1);
  EXPECT_NE(down.out.find("t/" + dataset::Manifest::PartName(m->chunks[1].part) + " chunk 1 at offset " +
                          std::to_string(m->chunks[1].offset)),
            std::string::npos)
      << down.out;
  EXPECT_NE(down.out.find("checksum mismatch"), std::string::npos) << down.out;
}

TEST_F(DatasetTest, BadInputIsRefusedWithWhereItWentWrong) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/bad.csv", "1,2\n3,x\n").ok());
  auto csv = Tessera(
      {"upload", "--store", store(), "--dataset", "b", "--format", "csv", "--input", dir_ + "/bad.csv"});
  EXPECT_EQ(csv.code, 1);
  EXPECT_NE(csv.out.find("bad.csv line 2 column 1: 'x' is not a number"), std::string::npos) << csv.out;
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/bad.svm", "1 3:0.5\n0 4-1\n").ok());
  auto svm = Tessera(
      {"upload", "--store", store(), "--dataset", "b", "--format", "libsvm", "--input", dir_ + "/bad.svm"});
  EXPECT_NE(svm.out.find("bad.svm line 2: '4-1' is not index:value"), std::string::npos) << svm.out;
  // Values that are not finite are malformed too (they would poison a model), with their line.
  struct NonFinite {
    std::string file, text, says;
  };
  const std::vector<NonFinite> non_finite = {
      {"nan.svm", "1 3:0.5\n0 5:nan\n", "nan.svm line 2: feature 5 value: 'nan' is not a finite number"},
      {"inf.svm", "1 3:0.5\n1 2:1\n0 7:-inf 8:1\n",
       "inf.svm line 3: feature 7 value: '-inf' is not a finite number"},
      {"big.svm", "1 3:1e39\n",
       "big.svm line 1: feature 3 value: '1e39' is not a finite number (past the range"},
      {"label.svm", "nan 3:1\n", "label.svm line 1: label: 'nan' is not a finite number"},
      {"nan.csv", "1,2\n3,inf\n", "nan.csv line 2 column 1: 'inf' is not a finite number"},
  };
  for (const auto& c : non_finite) {
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/" + c.file, c.text).ok());
    const std::string format = c.file.substr(c.file.find('.') + 1) == "svm" ? "libsvm" : "csv";
    auto r = Tessera(
        {"upload", "--store", store(), "--dataset", "b", "--format", format, "--input", dir_ + "/" + c.file});
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << r.out;
  }
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/list.txt", "missing.jpg\tcat\n").ok());
  auto list = Tessera(
      {"upload", "--store", store(), "--dataset", "b", "--format", "list", "--input", dir_ + "/list.txt"});
  EXPECT_NE(list.out.find("list.txt line 1"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("missing.jpg"), std::string::npos) << list.out;
  auto idx =
      Tessera({"upload", "--store", store(), "--dataset", "b", "--format", "idx", "--images",
               kFmnist + "train-images-idx3-ubyte.gz", "--labels", kFmnist + "t10k-labels-idx1-ubyte.gz"});
  EXPECT_NE(idx.out.find("60000 images but"), std::string::npos) << idx.out;
  EXPECT_NE(idx.out.find("10000 labels"), std::string::npos) << idx.out;
  auto swapped =
      Tessera({"upload", "--store", store(), "--dataset", "b", "--format", "idx", "--images",
               kFmnist + "train-labels-idx1-ubyte.gz", "--labels", kFmnist + "train-images-idx3-ubyte.gz"});
  EXPECT_NE(swapped.out.find("dimensions, expected 3"), std::string::npos) << swapped.out;
  auto fmt = Tessera(
      {"upload", "--store", store(), "--dataset", "b", "--format", "parquet", "--input", dir_ + "/bad.csv"});
  EXPECT_NE(fmt.out.find("unknown format 'parquet'"), std::string::npos) << fmt.out;
  auto name = Tessera({"upload", "--store", store(), "--dataset", "../escape", "--format", "text", "--input",
                       dir_ + "/bad.csv"});
  EXPECT_NE(name.out.find("data set name"), std::string::npos) << name.out;
  // None of these left a data set behind.
  auto ls = Tessera({"dataset", "ls", "--store", store()});
  EXPECT_EQ(ls.out.find(" b "), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find("unfinished"), std::string::npos) << ls.out;
}

}  // namespace
}  // namespace tessera::testing
