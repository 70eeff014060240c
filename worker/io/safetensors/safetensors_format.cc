#include "worker/io/safetensors/safetensors_format.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "worker/common/bounded_json.h"
#include "worker/io/safetensors/posix_file.h"

namespace quantd::io {
namespace {

struct DtypeRow {
  SafetensorsDtype dtype;
  const char* name;
  int size;
};

constexpr DtypeRow kDtypes[] = {
    {SafetensorsDtype::kBool, "BOOL", 1},      {SafetensorsDtype::kU8, "U8", 1},
    {SafetensorsDtype::kI8, "I8", 1},          {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1}, {SafetensorsDtype::kI16, "I16", 2},
    {SafetensorsDtype::kU16, "U16", 2},        {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2},      {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kU32, "U32", 4},        {SafetensorsDtype::kF32, "F32", 4},
    {SafetensorsDtype::kF64, "F64", 8},        {SafetensorsDtype::kI64, "I64", 8},
    {SafetensorsDtype::kU64, "U64", 8},
};

Status Corrupt(const std::string& file, const std::string& what) {
  return DataLossError(file + ": malformed safetensors header: " + what);
}

Status CorruptTensor(const std::string& file, const std::string& tensor, const std::string& what) {
  return DataLossError(file + ": tensor '" + tensor + "': " + what);
}

// A JSON number that is a non-negative integer, as uint64.
std::optional<uint64_t> AsUnsigned(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i >= 0) return static_cast<uint64_t>(i);
  }
  return std::nullopt;
}

StatusOr<SafetensorsEntry> ParseEntry(const std::string& file, const std::string& name,
                                      const nlohmann::json& v, uint64_t data_size) {
  if (name.empty()) return Corrupt(file, "empty tensor name");
  if (!v.is_object()) return CorruptTensor(file, name, "entry is not a JSON object");
  SafetensorsEntry e;
  e.name = name;

  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) {
    return CorruptTensor(file, name, "missing or non-string \"dtype\"");
  }
  const auto dtype = ParseSafetensorsDtype(dt->get_ref<const std::string&>());
  if (!dtype) {
    return CorruptTensor(file, name, "unknown dtype \"" + dt->get_ref<const std::string&>() + "\"");
  }
  e.dtype = *dtype;

  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) {
    return CorruptTensor(file, name, "missing or non-array \"shape\"");
  }
  if (sh->size() > static_cast<size_t>(kMaxSafetensorsRank)) {
    return CorruptTensor(
        file, name,
        "rank " + std::to_string(sh->size()) + " exceeds " + std::to_string(kMaxSafetensorsRank));
  }
  for (const auto& d : *sh) {
    const auto dim = AsUnsigned(d);
    if (!dim || *dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return CorruptTensor(file, name,
                           "shape " + sh->dump() + " has a non-integer or negative dimension");
    }
    e.shape.push_back(static_cast<int64_t>(*dim));
  }
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2) {
    return CorruptTensor(file, name, "\"data_offsets\" must be an array [begin, end]");
  }
  const auto begin = AsUnsigned((*off)[0]);
  const auto end = AsUnsigned((*off)[1]);
  if (!begin || !end) {
    return CorruptTensor(file, name,
                         "data_offsets " + off->dump() + " are not non-negative integers");
  }
  if (*begin > *end) {
    return CorruptTensor(file, name, "data_offsets " + off->dump() + " have begin > end");
  }
  if (*end > data_size) {
    return CorruptTensor(file, name,
                         "data_offsets " + off->dump() + " run past the end of the data section (" +
                             std::to_string(data_size) + " bytes; truncated file?)");
  }
  e.begin = *begin;
  e.end = *end;
  // numel * element size must not overflow before it is compared with the
  // byte range, so the running product is bounded by that range.
  const std::string need =
      "dtype " + std::string(SafetensorsDtypeName(e.dtype)) + " and shape " + sh->dump() + " need ";
  uint64_t bytes = static_cast<uint64_t>(SafetensorsDtypeSize(e.dtype));
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
    bytes = 0;
  } else {
    for (int64_t dim : e.shape) {
      if (static_cast<uint64_t>(dim) > e.nbytes() / bytes) {
        return CorruptTensor(file, name,
                             need + "more bytes than data_offsets " + off->dump() + " hold (" +
                                 std::to_string(e.nbytes()) + ")");
      }
      bytes *= static_cast<uint64_t>(dim);
    }
  }
  if (e.nbytes() != bytes) {
    return CorruptTensor(file, name,
                         need + std::to_string(bytes) + " bytes but data_offsets " + off->dump() +
                             " hold " + std::to_string(e.nbytes()));
  }
  return e;
}

}  // namespace

std::optional<SafetensorsDtype> ParseSafetensorsDtype(std::string_view name) {
  for (const auto& row : kDtypes) {
    if (name == row.name) return row.dtype;
  }
  return std::nullopt;
}

SafetensorsDtype KeptSafetensorsDtype(std::string_view dtype) {
  return ParseSafetensorsDtype(dtype).value_or(SafetensorsDtype::kF32);
}

const char* SafetensorsDtypeName(SafetensorsDtype dtype) {
  for (const auto& row : kDtypes) {
    if (row.dtype == dtype) return row.name;
  }
  return "?";
}

int SafetensorsDtypeSize(SafetensorsDtype dtype) {
  for (const auto& row : kDtypes) {
    if (row.dtype == dtype) return row.size;
  }
  return 1;
}

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const SafetensorsEntry* SafetensorsHeader::Find(std::string_view name) const {
  auto it =
      std::lower_bound(tensors.begin(), tensors.end(), name,
                       [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  if (it == tensors.end() || it->name != name) return nullptr;
  return &*it;
}

StatusOr<uint64_t> ParseSafetensorsHeaderLength(const uint8_t prefix[8], uint64_t file_size,
                                                const std::string& file) {
  if (file_size < 8) {
    return Corrupt(file, "file is " + std::to_string(file_size) +
                             " bytes, shorter than the 8-byte length prefix");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  if (n < 2) return Corrupt(file, "header length " + std::to_string(n) + " is too small");
  if (n > kMaxSafetensorsHeaderBytes) {
    return Corrupt(file, "header length " + std::to_string(n) + " exceeds the " +
                             std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  if (n > file_size - 8) {
    return Corrupt(file, "header length " + std::to_string(n) + " runs past the end of the " +
                             std::to_string(file_size) + "-byte file (truncated file?)");
  }
  return n;
}

StatusOr<SafetensorsHeader> ParseSafetensorsHeaderJson(std::string_view json, uint64_t data_size,
                                                       const std::string& file) {
  // The format requires the header to be a JSON object; padding is spaces.
  size_t first = json.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || json[first] != '{') {
    return Corrupt(file, "header does not start with '{'");
  }
  // The header length is already bounded (kMaxSafetensorsHeaderBytes).
  StatusOr<nlohmann::json> parsed = ParseBoundedJson(
      json, JsonBounds{kMaxSafetensorsHeaderBytes, kMaxSafetensorsJsonDepth}, "header");
  if (!parsed.ok()) return Corrupt(file, parsed.status().message());
  const nlohmann::json root = std::move(parsed).value();
  if (!root.is_object()) return Corrupt(file, "header is not a JSON object");

  SafetensorsHeader h;
  h.data_size = data_size;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& key = it.key();
    if (key == "__metadata__") {
      if (!it->is_object()) return Corrupt(file, "\"__metadata__\" is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        h.metadata[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      }
      continue;
    }
    QD_ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(file, key, *it, data_size));
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });
  return h;
}

StatusOr<SafetensorsHeader> ParseSafetensorsBuffer(std::string_view bytes,
                                                   const std::string& file) {
  uint8_t prefix[8] = {0};
  if (!bytes.empty()) std::memcpy(prefix, bytes.data(), std::min<size_t>(8, bytes.size()));
  QD_ASSIGN_OR_RETURN(uint64_t n, ParseSafetensorsHeaderLength(prefix, bytes.size(), file));
  QD_ASSIGN_OR_RETURN(SafetensorsHeader h,
                      ParseSafetensorsHeaderJson(bytes.substr(8, n), bytes.size() - 8 - n, file));
  h.data_offset = 8 + n;
  return h;
}

StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view json, const std::string& file) {
  StatusOr<nlohmann::json> parsed =
      ParseBoundedJson(json, JsonBounds{json_limits::kSafetensorsIndex}, file, StatusCode::kDataLoss);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json index = std::move(parsed).value();
  if (!index.is_object()) return DataLossError(file + ": not a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) {
    return DataLossError(file + ": missing \"weight_map\" object");
  }
  SafetensorsIndex out;
  auto md = index.find("metadata");
  if (md != index.end() && md->is_object()) {
    for (auto it = md->begin(); it != md->end(); ++it) {
      out.metadata[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    }
  }
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) {
      return DataLossError(file + ": weight_map entry for tensor '" + it.key() +
                           "' is not a file name");
    }
    out.weight_map.emplace_back(it.key(), it->get<std::string>());
  }
  if (out.weight_map.empty()) return DataLossError(file + ": empty weight_map");
  return out;
}

StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  QD_ASSIGN_OR_RETURN(auto f, ReadOnlyFile::Open(path));
  uint8_t prefix[8] = {0};
  if (f->size() >= 8) QD_RETURN_IF_ERROR(f->ReadAt(0, 8, prefix));
  QD_ASSIGN_OR_RETURN(uint64_t n, ParseSafetensorsHeaderLength(prefix, f->size(), path));
  std::string json(n, '\0');
  QD_RETURN_IF_ERROR(f->ReadAt(8, n, json.data()));
  QD_ASSIGN_OR_RETURN(SafetensorsHeader h,
                      ParseSafetensorsHeaderJson(json, f->size() - 8 - n, path));
  h.data_offset = 8 + n;
  return h;
}

}  // namespace quantd::io
