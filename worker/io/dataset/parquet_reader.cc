// The Parquet reader (parquet_reader.h): the footer and schema (FileMetaData,
// SchemaElement, the column tree, row groups), reading column chunks (page
// headers, dictionary pages) and record assembly from repetition/definition
// levels into JSON. Page decoding is in parquet_encodings.h.
#include "worker/io/dataset/parquet_reader.h"

#include <algorithm>
#include <map>

#include "worker/common/cancellation.h"
#include "worker/io/dataset/parquet_encodings.h"
#include "worker/io/dataset/thrift_compact.h"

namespace quantd::parquet {
namespace {

using json = nlohmann::json;
using thrift::CompactReader;
using thrift::CType;

// Thrift nesting the footer may use (FileMetaData > RowGroup > ColumnChunk >
// ColumnMetaData > Statistics ... is about 6 deep).
constexpr int kThriftDepth = 32;
// Bytes charged per decoded level/value slot (two level bytes and a json).
constexpr uint64_t kSlotCost = 2 + sizeof(json);

struct SchemaElement {
  int type = -1;
  int repetition = kRequired;
  std::string name;
  int num_children = 0;
  int converted = -1;
  int logical = -1;  // LogicalType union member
  bool is_unsigned = false;
};

struct ColumnMeta {
  int type = -1;
  int codec = 0;
  int64_t num_values = 0;
  int64_t total_compressed = -1;
  int64_t data_page_offset = -1;
  int64_t dict_page_offset = -1;
};

struct RowGroup {
  int64_t num_rows = 0;
  std::vector<ColumnMeta> columns;  // wanted leaves only, in `Reader::wanted_` order
};

// One schema node; `def`/`rep` are the levels at which it is present.
struct Node {
  const SchemaElement* el = nullptr;
  std::vector<int> children;
  int def = 0;
  int rep = 0;
  int leaf = -1;        // leaf column index, for primitives
  bool unwrap = false;  // its value is its one child's value (LIST wrappers)
  bool is_map = false;
};

// Decoded levels and values of one leaf column within a row group.
struct Triplets {
  std::vector<uint8_t> rep;
  std::vector<uint8_t> def;
  std::vector<json> vals;  // aligned with rep/def; set where def == max_def
  std::vector<size_t> record_starts;
};

class Reader {
 public:
  Reader(std::string_view content, const std::string& name, const ParquetLimits& limits)
      : content_(content), name_(name), limits_(limits) {}

  Status ParseFooter();
  Status BuildSchema();
  std::vector<std::string> TopNames() const;
  StatusOr<std::vector<json>> Read(const std::vector<std::string>& columns, size_t max_rows);

 private:
  Status Bad(const std::string& what) const {
    return InvalidArgumentError("dataset " + name_ + ": parquet " + what);
  }
  Status Limit(const std::string& what) const {
    return ResourceExhaustedError("dataset " + name_ + ": parquet " + what);
  }
  Status Charge(uint64_t bytes) { return Prefixed(budget_.Charge(bytes)); }
  // A decoder's status (parquet_encodings.h) with the "dataset NAME: parquet "
  // prefix.
  Status Prefixed(const Status& s) const;
  Status Footer(Status s) const {
    if (!s.ok() && s.code() == StatusCode::kInvalidArgument) return Bad("footer: " + s.message());
    return s;
  }

  Status ParseSchemaElement(CompactReader& r, SchemaElement* e);
  Status ParseRowGroups();
  Status ParseColumnMeta(CompactReader& r, ColumnMeta* m);
  Status BuildNode(int parent, int depth, size_t* next);
  Status CheckSupported(int node, const std::string& column) const;
  Status ReadChunk(int leaf, const ColumnMeta& cm, size_t need, Triplets* t);
  Status DecodePage(int leaf, const std::string& col, std::string_view levels_rep,
                    std::string_view levels_def, std::string_view values, int64_t num_values,
                    int encoding, bool v1, const std::vector<json>* dict, Triplets* t);
  Status DecodeValues(int leaf, const std::string& col, int encoding, std::string_view data,
                      size_t count, const std::vector<json>* dict, std::vector<json>* out);
  Status Decompress(int codec, std::string_view in, uint64_t size, std::string* buf,
                    std::string_view* out);
  Status Assemble(const std::vector<int>& path, size_t i, Triplets& t, size_t b, size_t e,
                  json* out);
  Status AssembleOne(const std::vector<int>& path, size_t i, Triplets& t, size_t b, size_t e,
                     json* out);
  Status Merge(json& into, json&& from, const std::string& col);

  std::string_view content_;
  std::string name_;
  ParquetLimits limits_;
  DecodeBudget budget_{limits_.max_decoded_bytes};
  size_t footer_start_ = 0;
  std::string_view footer_;
  std::vector<SchemaElement> schema_;
  size_t row_groups_pos_ = SIZE_MAX;          // offset in footer_ of the row_groups list
  std::vector<Node> nodes_;                   // nodes_[0] is the root
  std::vector<int> leaf_nodes_;               // leaf index -> node
  std::vector<std::vector<int>> leaf_paths_;  // leaf index -> nodes from the top-level field
  std::vector<int> wanted_;                   // wanted leaf indexes, ascending
  std::vector<RowGroup> row_groups_;
  CancellationPoller poller_{64};
};

Status Reader::Prefixed(const Status& s) const {
  if (s.code() == StatusCode::kInvalidArgument) return Bad(s.message());
  if (s.code() == StatusCode::kResourceExhausted) return Limit(s.message());
  return s;
}

Status Reader::DecodeValues(int leaf, const std::string& col, int encoding, std::string_view data,
                            size_t count, const std::vector<json>* dict, std::vector<json>* out) {
  const SchemaElement& e = *nodes_[leaf_nodes_[leaf]].el;
  // Integers are unsigned when annotated so (UINT_8..UINT_64 are 11..14).
  const bool as_unsigned = e.is_unsigned || (e.converted >= 11 && e.converted <= 14);
  return Prefixed(
      parquet::DecodeValues(e.type, as_unsigned, col, encoding, data, count, dict, &budget_, out));
}

Status Reader::Decompress(int codec, std::string_view in, uint64_t size, std::string* buf,
                          std::string_view* out) {
  return Prefixed(parquet::Decompress(codec, in, size, limits_.max_page_bytes, &budget_, buf, out));
}

Status Reader::ParseFooter() {
  const size_t n = content_.size();
  if (n < 12 || content_.substr(0, 4) != "PAR1") {
    if (n >= 4 && content_.substr(0, 4) == "PARE") return Bad("file is encrypted (unsupported)");
    return Bad("bad magic: not a Parquet file");
  }
  if (content_.substr(n - 4) != "PAR1") {
    if (content_.substr(n - 4) == "PARE") return Bad("file is encrypted (unsupported)");
    return Bad("bad magic at the end: truncated or not a Parquet file");
  }
  uint64_t len = LoadU32(content_.data() + n - 8);
  if (len > n - 12)
    return Bad("footer length " + std::to_string(len) + " runs past the file (" +
               std::to_string(n) + " bytes)");
  if (len > limits_.max_footer_bytes)
    return Limit("footer of " + std::to_string(len) + " bytes is over max_footer_bytes");
  footer_start_ = n - 8 - len;
  footer_ = content_.substr(footer_start_, len);
  CompactReader r(footer_, kThriftDepth);
  bool have_schema = false;
  Status s = r.ReadStruct([&](int16_t id, CType type) -> Status {
    if (id == 2) {
      have_schema = true;
      return r.ReadList(
          type,
          [&](uint64_t count, CType) -> Status {
            if (count > uint64_t{limits_.max_columns} + 1) {
              return Limit("schema has " + std::to_string(count) + " elements, over max_columns (" +
                           std::to_string(limits_.max_columns) + ")");
            }
            schema_.reserve(count);
            return OkStatus();
          },
          [&](CType elem) -> Status {
            if (elem != CType::kStruct)
              return InvalidArgumentError("schema element is not a struct");
            schema_.emplace_back();
            return ParseSchemaElement(r, &schema_.back());
          });
    }
    if (id == 4) {
      // Parsed after the schema, keeping only the wanted columns.
      row_groups_pos_ = r.pos();
      if (type != CType::kList) return InvalidArgumentError("row_groups is not a list");
    }
    if (id == 8 || id == 9) return InvalidArgumentError("file is encrypted (unsupported)");
    return r.Skip(type);
  });
  if (!s.ok()) return s.code() == StatusCode::kInvalidArgument ? Footer(s) : s;
  if (!have_schema || schema_.empty()) return Bad("footer has no schema");
  return OkStatus();
}

Status Reader::ParseSchemaElement(CompactReader& r, SchemaElement* e) {
  return r.ReadStruct([&](int16_t id, CType type) -> Status {
    switch (id) {
      case 1:
        return r.ReadI32(type, &e->type);
      case 3:
        return r.ReadI32(type, &e->repetition);
      case 4: {
        std::string_view v;
        QD_RETURN_IF_ERROR(r.ReadBinary(type, &v));
        e->name = std::string(v);
        return OkStatus();
      }
      case 5:
        return r.ReadI32(type, &e->num_children);
      case 6:
        return r.ReadI32(type, &e->converted);
      case 10:
        if (type != CType::kStruct) return r.Skip(type);
        return r.ReadStruct([&](int16_t lid, CType ltype) -> Status {
          e->logical = lid;
          if (lid != kLInteger || ltype != CType::kStruct) return r.Skip(ltype);
          return r.ReadStruct([&](int16_t iid, CType itype) -> Status {
            if (iid == 2) {
              bool is_signed;
              QD_RETURN_IF_ERROR(r.ReadBool(itype, &is_signed));
              e->is_unsigned = !is_signed;
              return OkStatus();
            }
            return r.Skip(itype);
          });
        });
      default:
        return r.Skip(type);
    }
  });
}

Status Reader::BuildNode(int parent, int depth, size_t* next) {
  const SchemaElement& pe = *nodes_[parent].el;
  if (pe.num_children < 0 || static_cast<size_t>(pe.num_children) > schema_.size() - *next) {
    return Bad("schema element \"" + pe.name + "\" has " + std::to_string(pe.num_children) +
               " children, more than the schema holds");
  }
  for (int c = 0; c < pe.num_children; ++c) {
    // Earlier children's subtrees consume elements too.
    if (*next >= schema_.size())
      return Bad("schema element \"" + pe.name + "\" has more children than the schema holds");
    const SchemaElement& e = schema_[(*next)++];
    // Names become JSON keys, which must be UTF-8 for dump().
    if (!ValidUtf8(e.name)) return Bad("column name is not valid UTF-8");
    if (e.repetition < kRequired || e.repetition > kRepeated)
      return Bad("column \"" + e.name + "\" has bad repetition " + std::to_string(e.repetition));
    Node n;
    n.el = &e;
    n.def = nodes_[parent].def + (e.repetition != kRequired ? 1 : 0);
    n.rep = nodes_[parent].rep + (e.repetition == kRepeated ? 1 : 0);
    int idx = static_cast<int>(nodes_.size());
    nodes_.push_back(std::move(n));
    nodes_[parent].children.push_back(idx);
    if (e.num_children > 0) {
      if (depth + 1 > limits_.max_nesting)
        return Limit("schema nests deeper than max_nesting (" +
                     std::to_string(limits_.max_nesting) + ")");
      QD_RETURN_IF_ERROR(BuildNode(idx, depth + 1, next));
    } else {
      if (e.type < 0) return Bad("column \"" + e.name + "\" is a group without children");
      nodes_[idx].leaf = static_cast<int>(leaf_nodes_.size());
      leaf_nodes_.push_back(idx);
    }
  }
  return OkStatus();
}

Status Reader::BuildSchema() {
  nodes_.reserve(schema_.size());
  Node root;
  root.el = &schema_[0];
  nodes_.push_back(std::move(root));
  size_t next = 1;
  QD_RETURN_IF_ERROR(BuildNode(0, 1, &next));
  if (next != schema_.size()) return Bad("schema has elements outside the root");
  if (leaf_nodes_.empty()) return Bad("schema has no columns");
  // Lists and maps (LogicalTypes.md): mark the wrappers whose value is their
  // child's.
  for (Node& n : nodes_) {
    const SchemaElement& e = *n.el;
    if (e.converted == kMap || e.converted == kMapKeyValue || e.logical == kLMap) n.is_map = true;
    if (e.converted != kList && e.logical != kLList) continue;
    if (n.children.size() != 1 || nodes_[n.children[0]].el->repetition != kRepeated) {
      continue;  // Not a valid LIST: read it as the plain group it is.
    }
    n.unwrap = true;
    Node& r = nodes_[n.children[0]];
    // 2-level forms: the repeated field is the element when it is primitive,
    // has several fields, or is named "array" or "<list>_tuple".
    if (r.leaf < 0 && r.children.size() == 1 && r.el->name != "array" &&
        r.el->name != e.name + "_tuple") {
      r.unwrap = true;
    }
  }
  // Leaf paths from the top-level field.
  leaf_paths_.resize(leaf_nodes_.size());
  std::vector<int> parent(nodes_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (int c : nodes_[i].children) parent[c] = static_cast<int>(i);
  for (size_t l = 0; l < leaf_nodes_.size(); ++l) {
    for (int n = leaf_nodes_[l]; n > 0; n = parent[n]) leaf_paths_[l].push_back(n);
    std::reverse(leaf_paths_[l].begin(), leaf_paths_[l].end());
  }
  return OkStatus();
}

std::vector<std::string> Reader::TopNames() const {
  std::vector<std::string> names;
  for (int c : nodes_[0].children) names.push_back(nodes_[c].el->name);
  return names;
}

Status Reader::CheckSupported(int node, const std::string& column) const {
  const Node& n = nodes_[node];
  const SchemaElement& e = *n.el;
  if (n.is_map)
    return Bad("column \"" + column + "\": MAP (at \"" + e.name + "\") is not supported");
  if (n.leaf < 0) {
    for (int c : n.children) QD_RETURN_IF_ERROR(CheckSupported(c, column));
    return OkStatus();
  }
  if (e.converted == kDecimal || e.logical == kLDecimal)
    return Bad("column \"" + column + "\": DECIMAL is not supported");
  switch (e.type) {
    case kBoolean:
    case kInt32:
    case kInt64:
    case kFloat:
    case kDouble:
      return OkStatus();
    case kByteArray:
      if (e.converted < 0 || e.converted == kUtf8 || e.converted == kEnum || e.converted == kJson) {
        if (e.logical < 0 || e.logical == kLString || e.logical == kLEnum || e.logical == kLJson)
          return OkStatus();
      }
      return Bad("column \"" + column +
                 "\": BYTE_ARRAY annotated other than as a string is not supported");
    default:
      return Bad("column \"" + column + "\": type " + TypeName(e.type) + " is not supported");
  }
}

Status Reader::ParseColumnMeta(CompactReader& r, ColumnMeta* m) {
  return r.ReadStruct([&](int16_t id, CType type) -> Status {
    switch (id) {
      case 1:
        return r.ReadI32(type, &m->type);
      case 4:
        return r.ReadI32(type, &m->codec);
      case 5:
        return r.ReadInt(type, &m->num_values);
      case 7:
        return r.ReadInt(type, &m->total_compressed);
      case 9:
        return r.ReadInt(type, &m->data_page_offset);
      case 11:
        return r.ReadInt(type, &m->dict_page_offset);
      default:
        return r.Skip(type);
    }
  });
}

Status Reader::ParseRowGroups() {
  if (row_groups_pos_ == SIZE_MAX) return OkStatus();
  CompactReader r(footer_.substr(row_groups_pos_), kThriftDepth);
  const size_t num_leaves = leaf_nodes_.size();
  Status s = r.ReadList(
      CType::kList,
      [&](uint64_t count, CType elem) -> Status {
        if (count > limits_.max_row_groups)
          return Limit("file has " + std::to_string(count) + " row groups, over max_row_groups (" +
                       std::to_string(limits_.max_row_groups) + ")");
        if (count > 0 && elem != CType::kStruct)
          return InvalidArgumentError("row group is not a struct");
        row_groups_.reserve(count);
        return OkStatus();
      },
      [&](CType) -> Status {
        RowGroup rg;
        QD_RETURN_IF_ERROR(Charge(wanted_.size() * sizeof(ColumnMeta)));
        rg.columns.resize(wanted_.size());
        size_t ncols = 0;
        bool have_cols = false;
        QD_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, CType type) -> Status {
          if (id == 3) return r.ReadInt(type, &rg.num_rows);
          if (id != 1) return r.Skip(type);
          have_cols = true;
          return r.ReadList(
              type,
              [&](uint64_t count, CType elem) -> Status {
                if (count != num_leaves)
                  return InvalidArgumentError("row group has " + std::to_string(count) +
                                              " column chunks, the schema " +
                                              std::to_string(num_leaves) + " columns");
                if (count > 0 && elem != CType::kStruct)
                  return InvalidArgumentError("column chunk is not a struct");
                return OkStatus();
              },
              [&](CType) -> Status {
                size_t leaf = ncols++;
                auto it = std::lower_bound(wanted_.begin(), wanted_.end(), static_cast<int>(leaf));
                if (it == wanted_.end() || *it != static_cast<int>(leaf))
                  return r.Skip(CType::kStruct);
                ColumnMeta* m = &rg.columns[it - wanted_.begin()];
                bool have_meta = false;
                QD_RETURN_IF_ERROR(r.ReadStruct([&](int16_t cid, CType ctype) -> Status {
                  if (cid == 1)
                    return InvalidArgumentError("column chunk in another file (unsupported)");
                  if (cid == 3 && ctype == CType::kStruct) {
                    have_meta = true;
                    return ParseColumnMeta(r, m);
                  }
                  if (cid == 8 || cid == 9)
                    return InvalidArgumentError("column chunk is encrypted (unsupported)");
                  return r.Skip(ctype);
                }));
                if (!have_meta) return InvalidArgumentError("column chunk has no metadata");
                return OkStatus();
              });
        }));
        if (!have_cols) return InvalidArgumentError("row group has no columns");
        if (rg.num_rows < 0) return InvalidArgumentError("row group has negative num_rows");
        row_groups_.push_back(std::move(rg));
        return OkStatus();
      });
  return s.code() == StatusCode::kInvalidArgument ? Footer(s) : s;
}

Status Reader::DecodePage(int leaf, const std::string& col, std::string_view rep_data,
                          std::string_view def_data, std::string_view values, int64_t num_values,
                          int encoding, bool v1, const std::vector<json>* dict, Triplets* t) {
  const Node& node = nodes_[leaf_nodes_[leaf]];
  if (num_values < 0) return Bad("column \"" + col + "\": page has negative num_values");
  const size_t n = static_cast<size_t>(num_values);
  if (n > budget_.left() / kSlotCost)
    return Limit("column \"" + col + "\": page of " + std::to_string(n) +
                 " values decodes to more than max_decoded_bytes");
  QD_RETURN_IF_ERROR(Charge(n * kSlotCost));
  const size_t base = t->rep.size();
  std::vector<uint32_t> levels;
  auto read_levels = [&](std::string_view& data, int max, std::vector<uint8_t>* dst,
                         const char* what) -> Status {
    if (max == 0) {
      dst->insert(dst->end(), n, 0);
      return OkStatus();
    }
    std::string_view run = data;
    if (v1) {
      if (data.size() < 4) return Bad("column \"" + col + "\": " + what + " levels are truncated");
      uint32_t len = LoadU32(data.data());
      if (len > data.size() - 4)
        return Bad("column \"" + col + "\": " + what + " levels of " + std::to_string(len) +
                   " bytes run past their page");
      run = data.substr(4, len);
      data = data.substr(4 + len);
    }
    Status s = DecodeHybrid(run, BitWidth(max), n, max, &levels, what);
    if (!s.ok()) return Bad("column \"" + col + "\": " + s.message());
    dst->insert(dst->end(), levels.begin(), levels.end());
    return OkStatus();
  };
  std::string_view rest = values;
  if (v1) {
    // v1: repetition then definition levels, each with a 4-byte length.
    QD_RETURN_IF_ERROR(read_levels(rest, node.rep, &t->rep, "repetition"));
    QD_RETURN_IF_ERROR(read_levels(rest, node.def, &t->def, "definition"));
  } else {
    QD_RETURN_IF_ERROR(read_levels(rep_data, node.rep, &t->rep, "repetition"));
    QD_RETURN_IF_ERROR(read_levels(def_data, node.def, &t->def, "definition"));
  }
  size_t present = 0;
  for (size_t i = base; i < t->def.size(); ++i) {
    if (t->def[i] == node.def) ++present;
    if (t->rep[i] == 0) t->record_starts.push_back(i);
  }
  if (base == 0 && n > 0 && t->rep[0] != 0)
    return Bad("column \"" + col + "\": first value does not start a row");
  std::vector<json> vals;
  QD_RETURN_IF_ERROR(DecodeValues(leaf, col, encoding, rest, present, dict, &vals));
  t->vals.resize(base + n);
  size_t k = 0;
  for (size_t i = base; i < base + n; ++i) {
    if (t->def[i] == node.def) t->vals[i] = std::move(vals[k++]);
  }
  return OkStatus();
}

struct PageHeader {
  int type = -1;
  int32_t uncompressed = -1;
  int32_t compressed = -1;
  int32_t num_values = -1;
  int encoding = -1;
  int def_encoding = kRle;
  int rep_encoding = kRle;
  int32_t def_len = 0;
  int32_t rep_len = 0;
  bool is_compressed = true;
};

Status ParsePageHeader(CompactReader& r, PageHeader* h) {
  return r.ReadStruct([&](int16_t id, CType type) -> Status {
    switch (id) {
      case 1:
        return r.ReadI32(type, &h->type);
      case 2:
        return r.ReadI32(type, &h->uncompressed);
      case 3:
        return r.ReadI32(type, &h->compressed);
      case 5:  // DataPageHeader
      case 7:  // DictionaryPageHeader
        if (type != CType::kStruct) return r.Skip(type);
        return r.ReadStruct([&](int16_t fid, CType ftype) -> Status {
          if (fid == 1) return r.ReadI32(ftype, &h->num_values);
          if (fid == 2) return r.ReadI32(ftype, &h->encoding);
          if (id == 5 && fid == 3) return r.ReadI32(ftype, &h->def_encoding);
          if (id == 5 && fid == 4) return r.ReadI32(ftype, &h->rep_encoding);
          return r.Skip(ftype);
        });
      case 8:  // DataPageHeaderV2
        if (type != CType::kStruct) return r.Skip(type);
        return r.ReadStruct([&](int16_t fid, CType ftype) -> Status {
          switch (fid) {
            case 1:
              return r.ReadI32(ftype, &h->num_values);
            case 4:
              return r.ReadI32(ftype, &h->encoding);
            case 5:
              return r.ReadI32(ftype, &h->def_len);
            case 6:
              return r.ReadI32(ftype, &h->rep_len);
            case 7:
              return r.ReadBool(ftype, &h->is_compressed);
            default:
              return r.Skip(ftype);
          }
        });
      default:
        return r.Skip(type);
    }
  });
}

Status Reader::ReadChunk(int leaf, const ColumnMeta& cm, size_t need, Triplets* t) {
  const Node& node = nodes_[leaf_nodes_[leaf]];
  // The dotted schema path names a nested leaf, e.g. messages.list.element.role.
  std::string col;
  for (int n : leaf_paths_[leaf]) col += (col.empty() ? "" : ".") + nodes_[n].el->name;
  if (cm.type != node.el->type)
    return Bad("column \"" + col + "\": chunk type " + TypeName(cm.type) +
               " differs from the schema's " + TypeName(node.el->type));
  int64_t start = cm.data_page_offset;
  if (cm.dict_page_offset > 0 && cm.dict_page_offset < start) start = cm.dict_page_offset;
  if (start < 4 || cm.total_compressed < 0 || static_cast<uint64_t>(start) > footer_start_ ||
      static_cast<uint64_t>(cm.total_compressed) > footer_start_ - start) {
    return Bad("column \"" + col + "\": chunk at " + std::to_string(start) + " of " +
               std::to_string(cm.total_compressed) + " bytes lies outside the data");
  }
  std::string_view chunk = content_.substr(start, cm.total_compressed);
  size_t pos = 0;
  int64_t values_read = 0;
  std::vector<json> dict;
  bool have_dict = false;
  std::string buf;
  while (pos < chunk.size() && values_read < cm.num_values && t->record_starts.size() <= need) {
    if (poller_.Due()) return CancelledStatus("reading dataset " + name_);
    CompactReader r(chunk.substr(pos), kThriftDepth);
    PageHeader h;
    if (Status s = ParsePageHeader(r, &h); !s.ok()) {
      return s.code() == StatusCode::kInvalidArgument
                 ? Bad("column \"" + col + "\": page header at " + std::to_string(start + pos) +
                       ": " + s.message())
                 : s;
    }
    pos += r.pos();
    if (h.compressed < 0 || h.uncompressed < 0)
      return Bad("column \"" + col + "\": page has a negative size");
    if (static_cast<uint64_t>(h.compressed) > limits_.max_page_bytes ||
        static_cast<uint64_t>(h.uncompressed) > limits_.max_page_bytes) {
      return Limit("column \"" + col + "\": page of " +
                   std::to_string(std::max(h.compressed, h.uncompressed)) +
                   " bytes is over max_page_bytes");
    }
    if (static_cast<size_t>(h.compressed) > chunk.size() - pos)
      return Bad("column \"" + col + "\": page of " + std::to_string(h.compressed) +
                 " bytes runs past its chunk");
    std::string_view payload = chunk.substr(pos, h.compressed);
    pos += h.compressed;
    if (h.type == kDictionaryPage) {
      if (have_dict) return Bad("column \"" + col + "\": second dictionary page");
      if (h.encoding != kPlain && h.encoding != kPlainDictionary)
        return Bad("column \"" + col + "\": dictionary encoding " + EncodingName(h.encoding) +
                   " is not supported");
      if (h.num_values < 0) return Bad("column \"" + col + "\": dictionary has negative size");
      std::string_view data;
      QD_RETURN_IF_ERROR(Decompress(cm.codec, payload, h.uncompressed, &buf, &data));
      QD_RETURN_IF_ERROR(Charge(static_cast<uint64_t>(h.num_values) * sizeof(json)));
      // PLAIN bounds the count by the bytes (at least 1 bit each).
      if (static_cast<uint64_t>(h.num_values) > data.size() * 8ull)
        return Bad("column \"" + col + "\": dictionary of " + std::to_string(h.num_values) +
                   " values is longer than its page");
      QD_RETURN_IF_ERROR(DecodeValues(leaf, col, kPlain, data, h.num_values, nullptr, &dict));
      have_dict = true;
    } else if (h.type == kDataPage) {
      if (h.def_encoding != kRle && node.def > 0)
        return Bad("column \"" + col + "\": definition level encoding " +
                   EncodingName(h.def_encoding) + " is not supported");
      if (h.rep_encoding != kRle && node.rep > 0)
        return Bad("column \"" + col + "\": repetition level encoding " +
                   EncodingName(h.rep_encoding) + " is not supported");
      std::string_view data;
      QD_RETURN_IF_ERROR(Decompress(cm.codec, payload, h.uncompressed, &buf, &data));
      QD_RETURN_IF_ERROR(DecodePage(leaf, col, {}, {}, data, h.num_values, h.encoding, true,
                                    have_dict ? &dict : nullptr, t));
      values_read += h.num_values;
    } else if (h.type == kDataPageV2) {
      if (h.rep_len < 0 || h.def_len < 0 ||
          static_cast<int64_t>(h.rep_len) + h.def_len > h.compressed ||
          static_cast<int64_t>(h.rep_len) + h.def_len > h.uncompressed) {
        return Bad("column \"" + col + "\": DATA_PAGE_V2 level lengths exceed the page");
      }
      std::string_view rep = payload.substr(0, h.rep_len);
      std::string_view def = payload.substr(h.rep_len, h.def_len);
      std::string_view body = payload.substr(h.rep_len + h.def_len);
      uint64_t body_size = static_cast<uint64_t>(h.uncompressed) - h.rep_len - h.def_len;
      std::string_view data;
      QD_RETURN_IF_ERROR(Decompress(h.is_compressed ? cm.codec : 0, body, body_size, &buf, &data));
      QD_RETURN_IF_ERROR(DecodePage(leaf, col, rep, def, data, h.num_values, h.encoding, false,
                                    have_dict ? &dict : nullptr, t));
      values_read += h.num_values;
    }
    // INDEX_PAGE and unknown page types are skipped.
  }
  return OkStatus();
}

Status Reader::AssembleOne(const std::vector<int>& path, size_t i, Triplets& t, size_t b, size_t e,
                           json* out) {
  const Node& node = nodes_[path[i]];
  if (node.leaf >= 0) {
    if (e - b != 1)
      return Bad("column \"" + nodes_[path[0]].el->name + "\": levels do not match the schema");
    *out = std::move(t.vals[b]);
    return OkStatus();
  }
  if (i + 1 >= path.size()) return Bad("column path is malformed");
  json v;
  QD_RETURN_IF_ERROR(Assemble(path, i + 1, t, b, e, &v));
  if (node.unwrap) {
    *out = std::move(v);
  } else {
    *out = json::object();
    (*out)[nodes_[path[i + 1]].el->name] = std::move(v);
  }
  return OkStatus();
}

// The value of path[i] from triplets [b, e), whose parent is present.
Status Reader::Assemble(const std::vector<int>& path, size_t i, Triplets& t, size_t b, size_t e,
                        json* out) {
  const Node& node = nodes_[path[i]];
  if (b >= e)
    return Bad("column \"" + nodes_[path[0]].el->name + "\": levels do not match the schema");
  if (node.el->repetition == kRepeated) {
    *out = json::array();
    if (t.def[b] < node.def) return OkStatus();  // empty list
    size_t start = b;
    for (size_t k = b + 1; k <= e; ++k) {
      if (k == e || t.rep[k] <= node.rep) {
        json v;
        QD_RETURN_IF_ERROR(AssembleOne(path, i, t, start, k, &v));
        out->push_back(std::move(v));
        start = k;
      }
    }
    return OkStatus();
  }
  if (node.el->repetition == kOptional && t.def[b] < node.def) {
    *out = nullptr;
    return OkStatus();
  }
  return AssembleOne(path, i, t, b, e, out);
}

Status Reader::Merge(json& into, json&& from, const std::string& col) {
  if (into.is_object() && from.is_object()) {
    for (auto& [k, v] : from.items()) {
      auto it = into.find(k);
      if (it == into.end()) {
        into[k] = std::move(v);
      } else {
        QD_RETURN_IF_ERROR(Merge(*it, std::move(v), col));
      }
    }
    return OkStatus();
  }
  if (into.is_array() && from.is_array() && into.size() == from.size()) {
    for (size_t i = 0; i < into.size(); ++i)
      QD_RETURN_IF_ERROR(Merge(into[i], std::move(from[i]), col));
    return OkStatus();
  }
  if (into.is_null() && from.is_null()) return OkStatus();
  return Bad("column \"" + col + "\": its leaf columns disagree on the nesting");
}

StatusOr<std::vector<json>> Reader::Read(const std::vector<std::string>& columns, size_t max_rows) {
  std::vector<std::string> names = columns;
  if (names.empty()) names = TopNames();
  std::vector<int> tops;
  for (const std::string& c : names) {
    int found = -1;
    for (int n : nodes_[0].children)
      if (nodes_[n].el->name == c) found = n;
    if (found < 0) {
      std::string avail;
      for (const std::string& a : TopNames()) avail += (avail.empty() ? "" : ", ") + a;
      return Bad("has no column \"" + c + "\" (columns: " + avail + ")");
    }
    QD_RETURN_IF_ERROR(CheckSupported(found, c));
    tops.push_back(found);
  }
  for (size_t l = 0; l < leaf_paths_.size(); ++l) {
    if (std::find(tops.begin(), tops.end(), leaf_paths_[l][0]) != tops.end())
      wanted_.push_back(static_cast<int>(l));
  }
  QD_RETURN_IF_ERROR(ParseRowGroups());
  std::vector<json> rows;
  for (const RowGroup& rg : row_groups_) {
    if (rows.size() >= max_rows) break;
    size_t need = static_cast<size_t>(std::min<uint64_t>(rg.num_rows, max_rows - rows.size()));
    if (need == 0) continue;
    std::vector<Triplets> data(wanted_.size());
    for (size_t w = 0; w < wanted_.size(); ++w) {
      QD_RETURN_IF_ERROR(ReadChunk(wanted_[w], rg.columns[w], need, &data[w]));
      if (data[w].record_starts.size() < need) {
        return Bad("column \"" + nodes_[leaf_nodes_[wanted_[w]]].el->name + "\": chunk holds " +
                   std::to_string(data[w].record_starts.size()) + " rows, its row group " +
                   std::to_string(rg.num_rows));
      }
    }
    size_t first = rows.size();
    QD_RETURN_IF_ERROR(Charge(need * sizeof(json)));
    rows.resize(first + need, json::object());
    for (size_t w = 0; w < wanted_.size(); ++w) {
      Triplets& t = data[w];
      const std::vector<int>& path = leaf_paths_[wanted_[w]];
      const std::string& top = nodes_[path[0]].el->name;
      for (size_t r = 0; r < need; ++r) {
        if (poller_.Due()) return CancelledStatus("reading dataset " + name_);
        size_t b = t.record_starts[r];
        size_t e = r + 1 < t.record_starts.size() ? t.record_starts[r + 1] : t.rep.size();
        json v;
        QD_RETURN_IF_ERROR(Assemble(path, 0, t, b, e, &v));
        json& row = rows[first + r];
        auto it = row.find(top);
        if (it == row.end()) {
          row[top] = std::move(v);
        } else {
          QD_RETURN_IF_ERROR(Merge(*it, std::move(v), top));
        }
      }
    }
  }
  // Keep only the requested columns' order semantics: rows hold exactly them.
  return rows;
}

}  // namespace
}  // namespace quantd::parquet

namespace quantd {

StatusOr<std::vector<nlohmann::json>> ReadParquetRows(std::string_view content,
                                                      const std::vector<std::string>& columns,
                                                      const std::string& name, size_t max_rows,
                                                      const ParquetLimits& limits) {
  parquet::Reader r(content, name, limits);
  QD_RETURN_IF_ERROR(r.ParseFooter());
  QD_RETURN_IF_ERROR(r.BuildSchema());
  return r.Read(columns, max_rows);
}

StatusOr<std::vector<std::string>> ParquetColumnNames(std::string_view content,
                                                      const std::string& name,
                                                      const ParquetLimits& limits) {
  parquet::Reader r(content, name, limits);
  QD_RETURN_IF_ERROR(r.ParseFooter());
  QD_RETURN_IF_ERROR(r.BuildSchema());
  return r.TopNames();
}

}  // namespace quantd
