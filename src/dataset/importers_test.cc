// Unit tests of the importers and exporters, in one process on temporary files: every format
// reads what it should (plain and gzip), every malformed line is refused with the file and line,
// and what an import stored exports back to the same text.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <sstream>

#include "common/files.h"
#include "dataset/dataset.h"
#include "dataset/formats.h"
#include "tessera/example.pb.h"

namespace tessera::dataset {
namespace {

class ImportersTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = *MakeTempDir("importers-test-"); }
  void TearDown() override { (void)RemoveAll(dir_); }

  std::string Write(const std::string& name, const std::string& text, bool gzip = false) {
    const std::string path = dir_ + "/" + name;
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      EXPECT_NE(f, nullptr);
      EXPECT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
      gzclose(f);
    } else {
      EXPECT_TRUE(WriteFileAtomic(path, text).ok());
    }
    return path;
  }

  // Imports `text` as `format`; the records land in records_.
  Status Import(const std::string& format, const std::string& text, ImportOptions o = {}, bool gzip = false) {
    records_.clear();
    o.format = format;
    o.input = Write(format + (gzip ? ".gz" : ".in"), text, gzip);
    meta_ = nlohmann::json::object();
    return dataset::Import(
        o,
        [&](std::string_view r) {
          records_.emplace_back(r);
          return Status::OK();
        },
        &meta_, [](int64_t, int64_t, int64_t) {});
  }

  data::Example ExampleAt(size_t i) {
    data::Example ex;
    EXPECT_LT(i, records_.size());
    if (i < records_.size()) EXPECT_TRUE(ex.ParseFromString(records_[i]));
    return ex;
  }

  std::string dir_;
  std::vector<std::string> records_;
  nlohmann::json meta_;
};

TEST_F(ImportersTest, TextKeepsEveryLineAsItIsPlainOrGzip) {
  for (bool gzip : {false, true}) {
    ASSERT_TRUE(Import("text", "first line\n\n  spaced  \nlast without newline", {}, gzip).ok());
    EXPECT_EQ(records_, (std::vector<std::string>{"first line", "", "  spaced  ", "last without newline"}))
        << "gzip " << gzip;
  }
}

TEST_F(ImportersTest, CsvTakesTheLabelColumnByIndexOrName) {
  ASSERT_TRUE(Import("csv", "1.5,a,2\n-3,b,4e2\n\n", {.label_column = "1"}).ok());
  ASSERT_EQ(records_.size(), 2u);  // the blank line is skipped
  EXPECT_EQ(ExampleAt(0).label(), "a");
  EXPECT_EQ(ExampleAt(1).values().size(), 2);
  EXPECT_FLOAT_EQ(ExampleAt(1).values(1), 400.0f);
  ImportOptions named;
  named.header = true;
  named.label_column = "y";
  ASSERT_TRUE(Import("csv", "x1,y,x2\r\n1,cat,2\r\n", named).ok());
  ASSERT_EQ(records_.size(), 1u);
  EXPECT_EQ(ExampleAt(0).label(), "cat");
  EXPECT_EQ(meta_["label_column"], 1);
}

TEST_F(ImportersTest, LibsvmReadsSparseFeaturesAndComments) {
  for (bool gzip : {false, true}) {
    ASSERT_TRUE(Import("libsvm", "# a comment\n1 3:0.5 10:2  # trailing\n-1\n0 7:1e-3\n", {}, gzip).ok());
    ASSERT_EQ(records_.size(), 3u);
    auto first = ExampleAt(0);
    EXPECT_EQ(first.label(), "1");
    EXPECT_EQ(std::vector<uint64_t>(first.feature_ids().begin(), first.feature_ids().end()),
              (std::vector<uint64_t>{3, 10}));
    EXPECT_EQ(ExampleAt(1).feature_ids_size(), 0);
    EXPECT_FLOAT_EQ(ExampleAt(2).feature_values(0), 1e-3f);
  }
}

TEST_F(ImportersTest, ListReadsEachFileWithItsPathAndLabel) {
  Write("a.bin", "AAA");
  ASSERT_TRUE(std::filesystem::create_directories(dir_ + "/sub"));
  Write("sub/b.bin", std::string("B\0B", 3));
  ASSERT_TRUE(Import("list", "a.bin\tcat\nsub/b.bin\tdog\n").ok());
  ASSERT_EQ(records_.size(), 2u);
  EXPECT_EQ(ExampleAt(0).data(), "AAA");
  EXPECT_EQ(ExampleAt(1).path(), "sub/b.bin");
  EXPECT_EQ(ExampleAt(1).data(), std::string("B\0B", 3));
  EXPECT_EQ(ExampleAt(1).label(), "dog");
}

TEST_F(ImportersTest, EveryMalformedLineIsRefusedWithTheFileAndLine) {
  struct Case {
    const char* format;
    const char* text;
    const char* label_column;
    const char* says;  // after the file's path
  } cases[] = {
      {"csv", "1,2\n3,x\n", "0", " line 2 column 1: 'x' is not a number"},
      {"csv", "1,2\n3\n", "0", " line 2: 1 columns, expected 2"},
      {"csv", "1,2,3\n4,5,6\n", "5", " line 1: no column 5 for the label"},
      {"csv", "1,2\n3,inf\n", "0", " line 2 column 1: 'inf' is not a finite number"},
      {"csv", "1,nan\n", "0", " line 1 column 1: 'nan' is not a finite number"},
      {"csv", "1,2\n", "y",
       "--label-column 'y' is not a column name (pass --header to use names) nor an index"},
      {"libsvm", "1 3:0.5\n0 4-1\n", "0", " line 2: '4-1' is not index:value"},
      {"libsvm", "1 3:\n", "0", " line 1: '3:' is not index:value"},
      {"libsvm", "1 x:1\n", "0", " line 1: 'x:1' is not index:value"},
      {"libsvm", "1 -3:1\n", "0", " line 1: '-3:1' is not index:value"},
      {"libsvm", "1 3:0.5\n0 5:nan\n", "0", " line 2: feature 5 value: 'nan' is not a finite number"},
      {"libsvm", "1 3:1e39\n", "0", " line 1: feature 3 value: '1e39' is not a finite number"},
      {"libsvm", "yes 3:1\n", "0", " line 1: label: 'yes' is not a number"},
      {"list", "a.bin\n", "0", " line 1: expected 'path<TAB>label'"},
  };
  for (const auto& c : cases) {
    ImportOptions o;
    o.label_column = c.label_column;
    Status s = Import(c.format, c.text, o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.format << ": " << c.text;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.format << " '" << c.text << "' said: " << s;
  }
  // A listed file that is not there: NotFound, with the list's line and the file.
  Status missing = Import("list", "missing.jpg\tcat\n");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find(" line 1: no such file '" + dir_ + "/missing.jpg'"), std::string::npos)
      << missing;
}

TEST_F(ImportersTest, MistakesInTheRequestAreNamed) {
  ImportOptions o;
  o.format = "parquet";
  o.input = Write("x", "1\n");
  nlohmann::json meta;
  auto sink = [](std::string_view) { return Status::OK(); };
  auto quiet = [](int64_t, int64_t, int64_t) {};
  EXPECT_NE(dataset::Import(o, sink, &meta, quiet).message().find("unknown format 'parquet'"),
            std::string::npos);
  o.format = "csv";
  o.input = "";
  EXPECT_NE(dataset::Import(o, sink, &meta, quiet).message().find("no input file given"), std::string::npos);
  o.input = dir_ + "/absent.csv";
  EXPECT_FALSE(dataset::Import(o, sink, &meta, quiet).ok());
  o.format = "idx";
  EXPECT_NE(dataset::Import(o, sink, &meta, quiet).message().find("--images FILE and --labels FILE"),
            std::string::npos);
  o.images = Write("images", "not an idx file at all");
  o.labels = o.images;
  EXPECT_NE(dataset::Import(o, sink, &meta, quiet).message().find("is not an IDX file"), std::string::npos);
  EXPECT_EQ(*RecordTypeFor("text"), "line");
  EXPECT_EQ(*RecordTypeFor("libsvm"), "example");
  EXPECT_FALSE(RecordTypeFor("xml").ok());
}

// Imports `text` into a data set of the store, then exports it as `format` to a file.
std::string RoundTrip(const std::string& dir, const std::string& format, const std::string& text) {
  const std::string input = dir + "/in." + format, store = dir + "/store", out = dir + "/out." + format;
  EXPECT_TRUE(WriteFileAtomic(input, text).ok());
  ImportOptions io;
  io.format = format;
  io.input = input;
  auto writer = DatasetWriter::Create(store, "d-" + format, format, *RecordTypeFor(format), {});
  EXPECT_TRUE(writer.ok()) << writer.status();
  nlohmann::json meta = nlohmann::json::object();
  EXPECT_TRUE(
      dataset::Import(
          io, [&](std::string_view r) { return (*writer)->Add(r); }, &meta, [](int64_t, int64_t, int64_t) {})
          .ok());
  EXPECT_TRUE((*writer)->Commit(meta).ok());
  auto reader = DatasetReader::Open(store, "d-" + format);
  EXPECT_TRUE(reader.ok()) << reader.status();
  ExportOptions eo;
  eo.format = format;
  eo.out = out;
  auto n = Export(**reader, eo, [](int64_t) {});
  EXPECT_TRUE(n.ok()) << n.status();
  auto back = ReadFile(out);
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : "";
}

TEST_F(ImportersTest, WhatWasImportedExportsBackToTheSameText) {
  EXPECT_EQ(RoundTrip(dir_, "text", "one\ntwo\n\nfour\n"), "one\ntwo\n\nfour\n");
  EXPECT_EQ(RoundTrip(dir_, "libsvm", "1 3:0.5 10:2\n-1\n0 7:0.25\n"), "1 3:0.5 10:2\n-1\n0 7:0.25\n");
  EXPECT_EQ(RoundTrip(dir_, "csv", "a,1.5,2\nb,-3,0.25\n"), "a,1.5,2\nb,-3,0.25\n");
}

}  // namespace
}  // namespace tessera::dataset
