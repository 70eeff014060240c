#include "worker/io/dataset/parquet_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "worker/common/cancellation.h"

namespace quantd {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

std::string Fixture(const std::string& file) {
  std::ifstream f("tests/data/parquet/" + file, std::ios::binary);
  EXPECT_TRUE(f.good()) << file;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<json> Rows(const std::string& file, const std::vector<std::string>& cols,
                       size_t max_rows = SIZE_MAX) {
  auto rows = ReadParquetRows(Fixture(file), cols, file, max_rows);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<json>{};
}

// --- Apache parquet-testing files (tests/data/parquet/README.md) ---

// alltypes_plain*.parquet: 8 rows written by Impala; PLAIN, uncompressed and
// snappy. Ids are stored 4,5,6,7,2,3,0,1; odd rows hold the "1" values.
TEST(ParquetReaderTest, AllTypesPlainAndSnappy) {
  const std::vector<std::string> cols = {
      "id",         "bool_col",  "tinyint_col", "smallint_col",    "int_col",
      "bigint_col", "float_col", "double_col",  "date_string_col", "string_col"};
  auto rows = Rows("alltypes_plain.parquet", cols);
  ASSERT_EQ(rows.size(), 8u);
  const int ids[] = {4, 5, 6, 7, 2, 3, 0, 1};
  const char* dates[] = {"03/01/09", "03/01/09", "04/01/09", "04/01/09",
                         "02/01/09", "02/01/09", "01/01/09", "01/01/09"};
  for (size_t i = 0; i < 8; ++i) {
    const json& r = rows[i];
    const bool odd = i % 2 == 1;
    EXPECT_EQ(r["id"], ids[i]);
    EXPECT_EQ(r["bool_col"], !odd);
    EXPECT_EQ(r["tinyint_col"], odd ? 1 : 0);
    EXPECT_EQ(r["smallint_col"], odd ? 1 : 0);
    EXPECT_EQ(r["int_col"], odd ? 1 : 0);
    EXPECT_EQ(r["bigint_col"], odd ? 10 : 0);
    EXPECT_FLOAT_EQ(r["float_col"].get<double>(), odd ? 1.1f : 0.0f);
    EXPECT_DOUBLE_EQ(r["double_col"].get<double>(), odd ? 10.1 : 0.0);
    EXPECT_EQ(r["date_string_col"], dates[i]);
    EXPECT_EQ(r["string_col"], odd ? "1" : "0");
    EXPECT_EQ(r.size(), cols.size());
  }
  auto snappy = Rows("alltypes_plain.snappy.parquet", {"id", "date_string_col", "double_col"});
  ASSERT_EQ(snappy.size(), 2u);
  EXPECT_EQ(snappy[0], json::parse(R"({"id":6,"date_string_col":"04/01/09","double_col":0.0})"));
  EXPECT_EQ(snappy[1], json::parse(R"({"id":7,"date_string_col":"04/01/09","double_col":10.1})"));
}

TEST(ParquetReaderTest, DictionaryEncodedColumns) {
  auto rows = Rows("alltypes_dictionary.parquet", {"id", "string_col", "bigint_col"});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], json::parse(R"({"id":0,"string_col":"0","bigint_col":0})"));
  EXPECT_EQ(rows[1], json::parse(R"({"id":1,"string_col":"1","bigint_col":10})"));
}

TEST(ParquetReaderTest, UnsupportedTypeIsNamed) {
  auto rows = ReadParquetRows(Fixture("alltypes_plain.parquet"), {"timestamp_col"}, "t.parquet");
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(rows.status().message(),
              HasSubstr("dataset t.parquet: parquet column \"timestamp_col\": type INT96"));
}

// datapage_v2.snappy.parquet: DATA_PAGE_V2, snappy, RLE_DICTIONARY,
// DELTA_BINARY_PACKED, RLE booleans, an optional string and an optional list.
TEST(ParquetReaderTest, DataPageV2) {
  auto rows = Rows("datapage_v2.snappy.parquet", {});
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], json::parse(R"({"a":"abc","b":1,"c":2.0,"d":true,"e":[1,2,3]})"));
  EXPECT_EQ(rows[1], json::parse(R"({"a":"abc","b":2,"c":3.0,"d":true,"e":null})"));
  EXPECT_EQ(rows[3], json::parse(R"({"a":null,"b":4,"c":5.0,"d":false,"e":[1,2,3]})"));
  EXPECT_EQ(rows[4], json::parse(R"({"a":"abc","b":5,"c":2.0,"d":true,"e":[1,2]})"));
}

TEST(ParquetReaderTest, NestedListsAndLegacyLists) {
  auto rows = Rows("nested_lists.snappy.parquet", {"a", "b"});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], json::parse(R"({"a":[[["a","b"],["c"]],[null,["d"]]],"b":1})"));
  EXPECT_EQ(rows[2], json::parse(R"({"a":[[["a","b"],["c","d"],["e"]],[null,["f"]]],"b":1})"));
  // Two-level LIST<LIST<INT32>> (repeated groups named "array").
  EXPECT_EQ(Rows("old_list_structure.parquet", {"a"}),
            std::vector<json>{json::parse(R"({"a":[[1,2],[3,4]]})")});
  EXPECT_EQ(Rows("null_list.parquet", {"emptylist"}),
            std::vector<json>{json::parse(R"({"emptylist":[]})")});
  auto lists = Rows("list_columns.parquet", {"int64_list", "utf8_list"});
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[1], json::parse(R"({"int64_list":[null,1],"utf8_list":null})"));
  EXPECT_EQ(lists[2], json::parse(R"({"int64_list":[4],"utf8_list":["efg",null,"hij","xyz"]})"));
  // A repeated group without a LIST annotation inside an optional struct.
  auto phones = Rows("repeated_no_annotation.parquet", {"id", "phoneNumbers"});
  ASSERT_EQ(phones.size(), 6u);
  EXPECT_EQ(phones[0], json::parse(R"({"id":1,"phoneNumbers":null})"));
  EXPECT_EQ(
      phones[3],
      json::parse(R"({"id":4,"phoneNumbers":{"phone":[{"kind":null,"number":5555555555}]}})"));
}

// Expected values as hyparquet (an independent JS reader) reads them.
TEST(ParquetReaderTest, ImpalaNullableNesting) {
  auto rows = Rows("nullable.impala.parquet", {"id", "int_array", "int_array_Array"});
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0],
            json::parse(R"({"id":1,"int_array":[1,2,3],"int_array_Array":[[1,2],[3,4]]})"));
  EXPECT_EQ(
      rows[1],
      json::parse(
          R"({"id":2,"int_array":[null,1,2,null,3,null],"int_array_Array":[[null,1,2,null],[3,null,4],[],null]})"));
  EXPECT_EQ(rows[2], json::parse(R"({"id":3,"int_array":[],"int_array_Array":[null]})"));
  EXPECT_EQ(rows[3], json::parse(R"({"id":4,"int_array":null,"int_array_Array":[]})"));
  EXPECT_EQ(rows[4], json::parse(R"({"id":5,"int_array":null,"int_array_Array":null})"));
  EXPECT_EQ(rows[6], json::parse(R"({"id":7,"int_array":null,"int_array_Array":[null,[5,6]]})"));
  auto map = ReadParquetRows(Fixture("nullable.impala.parquet"), {"int_map"}, "m");
  ASSERT_FALSE(map.ok());
  EXPECT_THAT(map.status().message(), HasSubstr("column \"int_map\": MAP"));
}

TEST(ParquetReaderTest, DeltaLengthByteArray) {
  auto rows = Rows("delta_length_byte_array.parquet", {"FRUIT"});
  ASSERT_EQ(rows.size(), 1000u);
  EXPECT_EQ(rows[0]["FRUIT"], "apple_banana_mango0");
  EXPECT_EQ(rows[2]["FRUIT"], "apple_banana_mango4");
  EXPECT_EQ(rows[999]["FRUIT"], "apple_banana_mango998001");  // i*i
}

TEST(ParquetReaderTest, GzipMembersAndZstd) {
  // 513 UINT64 values 1..513 in one page of two concatenated gzip members.
  auto rows = Rows("concatenated_gzip_members.parquet", {"long_col"});
  ASSERT_EQ(rows.size(), 513u);
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i]["long_col"].get<uint64_t>(), i + 1);
  // DATA_PAGE_V2 whose all-null values are a zstd stream of zero bytes.
  auto nulls = Rows("page_v2_empty_compressed.parquet", {"integer_column"});
  ASSERT_EQ(nulls.size(), 10u);
  for (const json& r : nulls) EXPECT_TRUE(r["integer_column"].is_null());
}

// --- hyparquet-writer fixtures (tests/data/parquet/make_fixtures.mjs) ---

std::vector<json> ChatRows() {
  return {
      json::parse(
          R"({"text":"hello world","ids":[1,2,3],"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello! \ud83d\udc4b"}]})"),
      json::parse(R"({"text":"","ids":[],"messages":[]})"),
      json::parse(
          R"({"text":"na\u00efve caf\u00e9 \u2014 \u65e5\u672c\u8a9e \ud83d\ude42","ids":[2147483647,-5],"messages":[{"role":"system","content":""}]})"),
      json::parse(R"({"text":null,"ids":null,"messages":null})"),
      json::parse(
          R"({"text":"last row","ids":[42],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]})"),
  };
}

TEST(ParquetReaderTest, HyparquetChatDataset) {
  for (const char* file : {"hyparquet_chat.parquet", "hyparquet_chat_rowgroups.parquet"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(Rows(file, {"text", "ids", "messages"}), ChatRows());
    auto names = ParquetColumnNames(Fixture(file), file);
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_EQ(*names, (std::vector<std::string>{"text", "ids", "messages"}));
    // Every row dumps (valid UTF-8 throughout).
    for (const json& r : Rows(file, {})) EXPECT_NO_THROW(r.dump());
  }
  // Early stop across row groups of two rows.
  auto first3 = Rows("hyparquet_chat_rowgroups.parquet", {"text"}, 3);
  ASSERT_EQ(first3.size(), 3u);
  EXPECT_EQ(
      first3[2],
      json::parse(R"({"text":"na\u00efve caf\u00e9 \u2014 \u65e5\u672c\u8a9e \ud83d\ude42"})"));
  EXPECT_TRUE(Rows("hyparquet_chat.parquet", {"text"}, 0).empty());
}

TEST(ParquetReaderTest, HyparquetEncodings) {
  // Dictionary, DELTA_BINARY_PACKED, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT,
  // 512-byte pages.
  auto rows = Rows("hyparquet_encodings.parquet", {"label", "count", "word", "score"});
  ASSERT_EQ(rows.size(), 300u);
  const char* labels[] = {"alpha", "beta", "gamma"};
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(rows[i]["label"], labels[i % 3]) << i;
    ASSERT_EQ(rows[i]["count"], int64_t{i} * i - 1000) << i;
    ASSERT_EQ(rows[i]["word"], "prefix_" + std::to_string(i)) << i;
    ASSERT_EQ(rows[i]["score"], i / 4.0) << i;
  }
}

// Records of nested lists over many small pages and three row groups, as
// make_fixtures.mjs builds them (the same values hyparquet reads back).
TEST(ParquetReaderTest, HyparquetNestedRecordsAcrossPages) {
  auto rows = Rows("hyparquet_paged.parquet", {"ids", "messages"});
  ASSERT_EQ(rows.size(), 200u);
  for (int i = 0; i < 200; ++i) {
    json ids = nullptr;
    if (i % 11 != 5) {
      ids = json::array();
      for (int k = 0; k < i % 9; ++k) ids.push_back(i * 100 + k);
    }
    json messages = nullptr;
    if (i % 7 != 3) {
      messages = json::array();
      for (int k = 0; k < i % 5; ++k) {
        messages.push_back(
            {{"role", k % 2 ? "assistant" : "user"},
             {"content",
              k == 2 ? json(nullptr) : json("m" + std::to_string(i) + "." + std::to_string(k))}});
      }
    }
    ASSERT_EQ(rows[i], json({{"ids", ids}, {"messages", messages}})) << i;
  }
  // Stopping early mid row group.
  auto first = Rows("hyparquet_paged.parquet", {"messages"}, 100);
  ASSERT_EQ(first.size(), 100u);
  EXPECT_EQ(
      first[99],
      json::parse(
          R"({"messages":[{"role":"user","content":"m99.0"},{"role":"assistant","content":"m99.1"},{"role":"user","content":null},{"role":"assistant","content":"m99.3"}]})"));
}

TEST(ParquetReaderTest, MissingColumnListsAvailable) {
  auto rows = ReadParquetRows(Fixture("hyparquet_chat.parquet"), {"txt"}, "chat.parquet");
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rows.status().message(),
            "dataset chat.parquet: parquet has no column \"txt\" (columns: text, ids, messages)");
}

TEST(ParquetReaderTest, StopsWhenCancelled) {
  CancellationScope scope([] { return true; });
  auto rows = ReadParquetRows(Fixture("hyparquet_encodings.parquet"), {}, "e");
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kCancelled);
}

// --- Hostile input ---

bool IsError(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kResourceExhausted;
}

TEST(ParquetReaderTest, EveryTruncationIsAnError) {
  const std::string file = Fixture("hyparquet_chat.parquet");
  for (size_t n = 0; n < file.size(); ++n) {
    auto rows = ReadParquetRows(std::string_view(file).substr(0, n), {}, "t");
    ASSERT_FALSE(rows.ok()) << n;
    ASSERT_TRUE(IsError(rows.status())) << n << rows.status();
  }
  // Truncated footers behind an intact trailer: the Thrift decoder must stop.
  const uint32_t len = static_cast<uint8_t>(file[file.size() - 8]) |
                       static_cast<uint8_t>(file[file.size() - 7]) << 8;
  const size_t start = file.size() - 8 - len;
  for (uint32_t k = 0; k < len; ++k) {
    std::string t = file.substr(0, start + k);
    t.append(reinterpret_cast<const char*>(&k), 4);
    t += "PAR1";
    auto rows = ReadParquetRows(t, {}, "t");
    ASSERT_FALSE(rows.ok()) << k;
    ASSERT_TRUE(IsError(rows.status())) << k << rows.status();
  }
}

TEST(ParquetReaderTest, FlippedBytesNeverCrash) {
  for (const char* f : {"hyparquet_chat.parquet", "datapage_v2.snappy.parquet"}) {
    const std::string file = Fixture(f);
    for (size_t i = 0; i < file.size(); ++i) {
      for (uint8_t mask : {0x01, 0x80, 0xff}) {
        std::string t = file;
        t[i] ^= mask;
        auto rows = ReadParquetRows(t, {}, "t");
        if (!rows.ok()) {
          ASSERT_TRUE(IsError(rows.status())) << f << " " << i << rows.status();
          continue;
        }
        for (const json& r : *rows) ASSERT_NO_THROW(r.dump()) << f << " " << i;
      }
    }
  }
}

// A minimal Thrift compact writer for crafting files.
class TW {
 public:
  void Field(int id, int type) {
    b += static_cast<char>(((id - last_) << 4) | type);
    last_ = id;
  }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      b += static_cast<char>(v | 0x80);
      v >>= 7;
    }
    b += static_cast<char>(v);
  }
  void Int(int id, int64_t v) {
    Field(id, 6);
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Str(int id, const std::string& s) {
    Field(id, 8);
    Varint(s.size());
    b += s;
  }
  void Begin(int id) {
    Field(id, 12);
    Push();
  }
  void List(int id, int elem_type, uint32_t n) {
    Field(id, 9);
    if (n < 15) {
      b += static_cast<char>((n << 4) | elem_type);
    } else {
      b += static_cast<char>(0xf0 | elem_type);
      Varint(n);
    }
  }
  void Push() {
    stack_.push_back(last_);
    last_ = 0;
  }
  void End() {
    b += '\0';
    last_ = stack_.back();
    stack_.pop_back();
  }
  std::string b;

 private:
  int last_ = 0;
  std::vector<int> stack_;
};

std::string PageHeader(int type, int32_t uncompressed, int32_t compressed, int32_t num_values,
                       int encoding) {
  TW w;
  w.Push();
  w.Int(1, type);
  w.Int(2, uncompressed);
  w.Int(3, compressed);
  w.Begin(type == 2 ? 7 : 5);
  w.Int(1, num_values);
  w.Int(2, encoding);
  w.End();
  w.End();
  return w.b;
}

// One required column "x" of `type` in one row group whose chunk is `pages`.
std::string MakeFile(const std::string& pages, int type, int64_t rows, int schema_children = 1,
                     int codec = 0) {
  std::string f = "PAR1" + pages;
  TW w;
  w.Push();
  w.Int(1, 1);
  w.List(2, 12, 1 + schema_children);
  w.Push();
  w.Str(4, "schema");
  w.Int(5, schema_children);
  w.End();
  for (int i = 0; i < schema_children; ++i) {
    w.Push();
    w.Int(1, type);
    w.Int(3, 0);
    w.Str(4, i == 0 ? "x" : "x" + std::to_string(i));
    w.End();
  }
  w.Int(3, rows);
  w.List(4, 12, 1);
  w.Push();
  w.List(1, 12, 1);
  w.Push();
  w.Int(2, 4);
  w.Begin(3);
  w.Int(1, type);
  w.Int(4, codec);
  w.Int(5, rows);
  w.Int(7, pages.size());
  w.Int(9, 4);
  w.End();
  w.End();
  w.Int(3, rows);
  w.End();
  w.End();
  f += w.b;
  uint32_t len = w.b.size();
  f.append(reinterpret_cast<const char*>(&len), 4);
  return f + "PAR1";
}

std::string PlainInt32Page(int32_t v) {
  return PageHeader(0, 4, 4, 1, 0) + std::string(reinterpret_cast<const char*>(&v), 4);
}

TEST(ParquetReaderTest, CraftedFileReads) {
  auto rows = ReadParquetRows(MakeFile(PlainInt32Page(-7), 1, 1), {"x"}, "c");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, std::vector<json>{json::parse(R"({"x":-7})")});
}

// A PLAIN page of 1000 INT32 values i*3 compressed with each codec by its
// library, then one whose header understates the decompressed size.
TEST(ParquetReaderTest, CompressedPagesRoundTrip) {
  std::string plain;
  for (int32_t i = 0; i < 1000; ++i) {
    const int32_t v = i * 3;
    plain.append(reinterpret_cast<const char*>(&v), 4);
  }
  for (int codec : {1, 2, 6}) {
    SCOPED_TRACE(codec);
    std::string z;
    if (codec == 1) {
      size_t n = snappy_max_compressed_length(plain.size());
      z.resize(n);
      ASSERT_EQ(snappy_compress(plain.data(), plain.size(), z.data(), &n), SNAPPY_OK);
      z.resize(n);
    } else if (codec == 2) {
      z_stream zs{};
      ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);  // gzip
      z.resize(deflateBound(&zs, plain.size()) + 32);
      zs.next_in = reinterpret_cast<Bytef*>(plain.data());
      zs.avail_in = plain.size();
      zs.next_out = reinterpret_cast<Bytef*>(z.data());
      zs.avail_out = z.size();
      ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
      z.resize(zs.total_out);
      deflateEnd(&zs);
    } else {
      z.resize(ZSTD_compressBound(plain.size()));
      size_t n = ZSTD_compress(z.data(), z.size(), plain.data(), plain.size(), 3);
      ASSERT_FALSE(ZSTD_isError(n));
      z.resize(n);
    }
    auto rows = ReadParquetRows(
        MakeFile(PageHeader(0, plain.size(), z.size(), 1000, 0) + z, 1, 1000, 1, codec), {"x"},
        "z");
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1000u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ((*rows)[i]["x"], i * 3);
    // The header says one byte less than the page decompresses to.
    Status s = ReadParquetRows(MakeFile(PageHeader(0, plain.size() - 1, z.size(), 1000, 0) + z, 1,
                                        1000, 1, codec),
                               {"x"}, "z")
                   .status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  }
  // Codecs without a library here are named.
  Status s = ReadParquetRows(MakeFile(PlainInt32Page(1), 1, 1, 1, 7), {"x"}, "z").status();
  EXPECT_THAT(s.message(), HasSubstr("compression codec LZ4_RAW is not supported"));
}

Status Read(const std::string& file, const ParquetLimits& limits = {}) {
  return ReadParquetRows(file, {}, "h", SIZE_MAX, limits).status();
}

TEST(ParquetReaderTest, FooterLengthPastTheFile) {
  std::string f = MakeFile(PlainInt32Page(1), 1, 1);
  const uint32_t huge = 1u << 30;
  std::memcpy(&f[f.size() - 8], &huge, 4);
  Status s = Read(f);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("footer length 1073741824 runs past the file"));
  EXPECT_THAT(Read("PAR1xxxxPAR2").message(), HasSubstr("bad magic"));
  ParquetLimits small;
  small.max_footer_bytes = 16;
  EXPECT_EQ(Read(MakeFile(PlainInt32Page(1), 1, 1), small).code(), StatusCode::kResourceExhausted);
}

TEST(ParquetReaderTest, HugeDeclaredPageSizes) {
  // A page header declaring 1 GiB uncompressed.
  std::string page = PageHeader(0, 1 << 30, 4, 1, 0) + std::string(4, '\0');
  EXPECT_EQ(Read(MakeFile(page, 1, 1)).code(), StatusCode::kResourceExhausted);
  // A compressed size past the chunk.
  page = PageHeader(0, 4, 4000, 1, 0) + std::string(4, '\0');
  Status s = Read(MakeFile(page, 1, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("runs past its chunk"));
  // 2^31-1 values from a 2-byte dictionary RLE run: bounded by the budget.
  std::string dict = PageHeader(2, 4, 4, 1, 0) + std::string(4, '\0');
  std::string run = std::string("\x00", 1) + "\xfe\xff\xff\xff\x0f";  // bit width 0, RLE run
  page = PageHeader(0, run.size(), run.size(), INT32_MAX, 8) + run;
  EXPECT_EQ(Read(MakeFile(dict + page, 1, INT32_MAX)).code(), StatusCode::kResourceExhausted);
}

TEST(ParquetReaderTest, DictionaryIndexAndBitWidthOutOfRange) {
  std::string dict = PageHeader(2, 8, 8, 2, 0) + std::string(8, '\0');
  // Bit width 2, RLE run of 1 of value 3 in a dictionary of 2.
  std::string idx = std::string("\x02\x02\x03", 3);
  Status s = Read(MakeFile(dict + PageHeader(0, 3, 3, 1, 8) + idx, 1, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dictionary index value 3 is out of range"));
  idx = std::string("\x21\x02\x00", 3);  // bit width 33
  s = Read(MakeFile(dict + PageHeader(0, 3, 3, 1, 8) + idx, 1, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bit width 33 is over 32"));
  // Dictionary indexes without a dictionary page.
  s = Read(MakeFile(PageHeader(0, 3, 3, 1, 8) + std::string("\x01\x02\x00", 3), 1, 1));
  EXPECT_THAT(s.message(), HasSubstr("without a dictionary page"));
}

TEST(ParquetReaderTest, LimitsOnColumnsAndRowGroupsAndDecoding) {
  ParquetLimits l;
  l.max_columns = 3;
  EXPECT_EQ(Read(MakeFile(PlainInt32Page(1), 1, 1, 5), l).code(), StatusCode::kResourceExhausted);
  l = {};
  l.max_row_groups = 2;
  EXPECT_EQ(ReadParquetRows(Fixture("hyparquet_chat_rowgroups.parquet"), {}, "r", SIZE_MAX, l)
                .status()
                .code(),
            StatusCode::kResourceExhausted);
  l = {};
  l.max_decoded_bytes = 4096;
  EXPECT_EQ(
      ReadParquetRows(Fixture("hyparquet_encodings.parquet"), {}, "r", SIZE_MAX, l).status().code(),
      StatusCode::kResourceExhausted);
  l = {};
  l.max_nesting = 2;
  EXPECT_EQ(ParquetColumnNames(Fixture("hyparquet_chat.parquet"), "r", l).status().code(),
            StatusCode::kResourceExhausted);
}

// The root claims two children, but its first child's subtree takes the
// rest of the schema (a fuzzer find: read past the schema list).
TEST(ParquetReaderTest, SchemaChildrenPastTheSchema) {
  TW w;
  w.Push();
  w.List(2, 12, 3);
  w.Push();
  w.Str(4, "schema");
  w.Int(5, 2);
  w.End();
  w.Push();
  w.Str(4, "g");
  w.Int(5, 1);
  w.End();
  w.Push();
  w.Int(1, 1);
  w.Str(4, "x");
  w.End();
  w.End();
  uint32_t len = w.b.size();
  std::string f = "PAR1" + w.b + std::string(reinterpret_cast<const char*>(&len), 4) + "PAR1";
  auto names = ParquetColumnNames(f, "s");
  ASSERT_FALSE(names.ok());
  EXPECT_EQ(names.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(names.status().message(), HasSubstr("more children than the schema holds"));
}

TEST(ParquetReaderTest, InvalidUtf8IsRefused) {
  std::string v = "\xff\xfe";
  std::string data = std::string("\x02\x00\x00\x00", 4) + v;
  Status s = Read(MakeFile(PageHeader(0, data.size(), data.size(), 1, 0) + data, 6, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("not valid UTF-8"));
  // A nested leaf is named by its path: a flipped byte in a message's
  // content turns "Hi" into invalid UTF-8.
  std::string chat = Fixture("hyparquet_chat.parquet");
  size_t at = chat.find("Hi");
  ASSERT_NE(at, std::string::npos);
  chat[at] = '\xc3';
  s = ReadParquetRows(chat, {"messages"}, "c").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("column \"messages.list.element.content\""));
}

TEST(ParquetReaderTest, UnknownCodecAndEncodingAreNamed) {
  std::string f = MakeFile(PageHeader(0, 4, 4, 1, 9 + 3) + std::string(4, '\0'), 1, 1);
  EXPECT_THAT(Read(f).message(), HasSubstr("encoding encoding 12 is not supported"));
  Status s = Read(Fixture("hyparquet_chat.parquet").substr(0, 4) + "junk");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd
