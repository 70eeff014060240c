#include "tests/peers/onnx_graph_edit.h"

#include <utility>

namespace quantd::peers {
namespace {

// onnx.proto field numbers.
constexpr int kModelGraph = 7;
constexpr int kGraphNode = 1, kGraphInitializer = 5, kGraphOutput = 12;
constexpr int kNodeInput = 1, kNodeOutput = 2, kNodeName = 3, kNodeOpType = 4, kNodeAttribute = 5;
constexpr int kAttributeName = 1, kAttributeI = 3;
constexpr int kTensorDims = 1, kTensorDataType = 2, kTensorName = 8, kTensorRawData = 9;
constexpr int kValueInfoName = 1, kValueInfoType = 2;
constexpr int kTypeTensorType = 1, kTensorTypeElemType = 1;

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

bool GetVarint(std::string_view data, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= data.size()) return false;
    const uint8_t b = static_cast<uint8_t>(data[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

ProtoField Bytes(int number, std::string bytes) {
  return {number, kLengthDelimited, 0, std::move(bytes)};
}
ProtoField Varint(int number, uint64_t value) { return {number, kVarint, value, {}}; }

// The first length-delimited field `number` of `fields`, or "".
std::string StringField(const std::vector<ProtoField>& fields, int number) {
  for (const ProtoField& f : fields)
    if (f.number == number && f.wire_type == kLengthDelimited) return f.bytes;
  return "";
}

}  // namespace

StatusOr<std::vector<ProtoField>> ParseProtoFields(std::string_view data) {
  std::vector<ProtoField> fields;
  size_t pos = 0;
  while (pos < data.size()) {
    uint64_t tag;
    if (!GetVarint(data, &pos, &tag)) return InvalidArgumentError("a truncated protobuf tag");
    ProtoField f;
    f.number = static_cast<int>(tag >> 3);
    f.wire_type = static_cast<int>(tag & 7);
    size_t len = 0;
    switch (f.wire_type) {
      case kVarint:
        if (!GetVarint(data, &pos, &f.value))
          return InvalidArgumentError("a truncated varint in field " + std::to_string(f.number));
        fields.push_back(std::move(f));
        continue;
      case kFixed64:
        len = 8;
        break;
      case kFixed32:
        len = 4;
        break;
      case kLengthDelimited: {
        uint64_t n;
        if (!GetVarint(data, &pos, &n))
          return InvalidArgumentError("a truncated length in field " + std::to_string(f.number));
        if (n > data.size()) return InvalidArgumentError("field " + std::to_string(f.number) +
                                                         " is longer than the message");
        len = static_cast<size_t>(n);
        break;
      }
      default:
        return InvalidArgumentError("wire type " + std::to_string(f.wire_type) + " in field " +
                                    std::to_string(f.number));
    }
    if (len > data.size() - pos)
      return InvalidArgumentError("field " + std::to_string(f.number) +
                                  " is longer than the message");
    f.bytes = std::string(data.substr(pos, len));
    pos += len;
    fields.push_back(std::move(f));
  }
  return fields;
}

std::string SerializeProtoFields(const std::vector<ProtoField>& fields) {
  std::string out;
  for (const ProtoField& f : fields) {
    PutVarint(&out, (static_cast<uint64_t>(f.number) << 3) | static_cast<uint64_t>(f.wire_type));
    if (f.wire_type == kVarint) {
      PutVarint(&out, f.value);
    } else {
      if (f.wire_type == kLengthDelimited) PutVarint(&out, f.bytes.size());
      out += f.bytes;
    }
  }
  return out;
}

StatusOr<OnnxGraphEditor> OnnxGraphEditor::Parse(std::string_view model_bytes) {
  OnnxGraphEditor e;
  QD_ASSIGN_OR_RETURN(e.model_, ParseProtoFields(model_bytes));
  bool found = false;
  for (size_t i = 0; i < e.model_.size(); ++i) {
    if (e.model_[i].number == kModelGraph && e.model_[i].wire_type == kLengthDelimited) {
      if (found) return InvalidArgumentError("the model has two graph fields");
      e.graph_index_ = i;
      found = true;
    }
  }
  if (!found) return InvalidArgumentError("the model has no graph");
  QD_ASSIGN_OR_RETURN(e.graph_, ParseProtoFields(e.model_[e.graph_index_].bytes));
  return e;
}

std::string OnnxGraphEditor::Serialize() const {
  std::vector<ProtoField> model = model_;
  model[graph_index_].bytes = SerializeProtoFields(graph_);
  return SerializeProtoFields(model);
}

std::vector<OnnxNode> OnnxGraphEditor::Nodes() const {
  std::vector<OnnxNode> nodes;
  for (const ProtoField& f : graph_) {
    if (f.number != kGraphNode) continue;
    auto fields = ParseProtoFields(f.bytes);
    if (!fields.ok()) continue;  // Parse accepted the graph; a node that is not a message is skipped
    OnnxNode n;
    for (const ProtoField& nf : *fields) {
      if (nf.wire_type != kLengthDelimited) continue;
      if (nf.number == kNodeInput) n.inputs.push_back(nf.bytes);
      if (nf.number == kNodeOutput) n.outputs.push_back(nf.bytes);
      if (nf.number == kNodeName) n.name = nf.bytes;
      if (nf.number == kNodeOpType) n.op_type = nf.bytes;
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

int OnnxGraphEditor::FindGraphField(int field_number, int name_field,
                                    const std::string& name) const {
  for (size_t i = 0; i < graph_.size(); ++i) {
    if (graph_[i].number != field_number) continue;
    auto fields = ParseProtoFields(graph_[i].bytes);
    if (fields.ok() && StringField(*fields, name_field) == name) return static_cast<int>(i);
  }
  return -1;
}

Status OnnxGraphEditor::SetNodeInput(const std::string& node, int index,
                                     const std::string& value) {
  const int i = FindGraphField(kGraphNode, kNodeName, node);
  if (i < 0) return NotFoundError("no node " + node);
  QD_ASSIGN_OR_RETURN(std::vector<ProtoField> fields, ParseProtoFields(graph_[i].bytes));
  int seen = 0;
  for (ProtoField& f : fields) {
    if (f.number != kNodeInput) continue;
    if (seen++ == index) {
      f.bytes = value;
      graph_[i].bytes = SerializeProtoFields(fields);
      return OkStatus();
    }
  }
  return OutOfRangeError("node " + node + " has " + std::to_string(seen) + " inputs, not " +
                         std::to_string(index + 1));
}

Status OnnxGraphEditor::RemoveNode(const std::string& node) {
  const int i = FindGraphField(kGraphNode, kNodeName, node);
  if (i < 0) return NotFoundError("no node " + node);
  graph_.erase(graph_.begin() + i);
  return OkStatus();
}

Status OnnxGraphEditor::SetIntAttribute(const std::string& node, const std::string& attribute,
                                        int64_t value) {
  const int i = FindGraphField(kGraphNode, kNodeName, node);
  if (i < 0) return NotFoundError("no node " + node);
  QD_ASSIGN_OR_RETURN(std::vector<ProtoField> fields, ParseProtoFields(graph_[i].bytes));
  for (ProtoField& f : fields) {
    if (f.number != kNodeAttribute) continue;
    QD_ASSIGN_OR_RETURN(std::vector<ProtoField> attr, ParseProtoFields(f.bytes));
    if (StringField(attr, kAttributeName) != attribute) continue;
    for (ProtoField& a : attr) {
      if (a.number == kAttributeI && a.wire_type == kVarint) {
        a.value = static_cast<uint64_t>(value);
        f.bytes = SerializeProtoFields(attr);
        graph_[i].bytes = SerializeProtoFields(fields);
        return OkStatus();
      }
    }
  }
  return NotFoundError("node " + node + " has no integer attribute " + attribute);
}

StatusOr<OnnxInitializer> OnnxGraphEditor::Initializer(const std::string& name) const {
  const int i = FindGraphField(kGraphInitializer, kTensorName, name);
  if (i < 0) return NotFoundError("no initializer " + name);
  QD_ASSIGN_OR_RETURN(std::vector<ProtoField> fields, ParseProtoFields(graph_[i].bytes));
  OnnxInitializer t;
  t.name = name;
  bool raw = false;
  for (const ProtoField& f : fields) {
    if (f.number == kTensorDims && f.wire_type == kVarint) {
      t.dims.push_back(static_cast<int64_t>(f.value));
    } else if (f.number == kTensorDims && f.wire_type == kLengthDelimited) {  // packed
      size_t pos = 0;
      uint64_t v;
      while (pos < f.bytes.size()) {
        if (!GetVarint(f.bytes, &pos, &v))
          return InvalidArgumentError("initializer " + name + ": truncated packed dims");
        t.dims.push_back(static_cast<int64_t>(v));
      }
    } else if (f.number == kTensorDataType && f.wire_type == kVarint) {
      t.data_type = static_cast<int>(f.value);
    } else if (f.number == kTensorRawData && f.wire_type == kLengthDelimited) {
      t.raw = f.bytes;
      raw = true;
    }
  }
  if (!raw) return InvalidArgumentError("initializer " + name + " is not stored as raw_data");
  return t;
}

namespace {
std::string EncodeInitializer(const OnnxInitializer& tensor) {
  std::vector<ProtoField> fields;
  for (int64_t d : tensor.dims) fields.push_back(Varint(kTensorDims, static_cast<uint64_t>(d)));
  fields.push_back(Varint(kTensorDataType, static_cast<uint64_t>(tensor.data_type)));
  fields.push_back(Bytes(kTensorName, tensor.name));
  fields.push_back(Bytes(kTensorRawData, tensor.raw));
  return SerializeProtoFields(fields);
}
}  // namespace

Status OnnxGraphEditor::SetInitializer(const OnnxInitializer& tensor) {
  const int i = FindGraphField(kGraphInitializer, kTensorName, tensor.name);
  if (i < 0) return NotFoundError("no initializer " + tensor.name);
  graph_[i].bytes = EncodeInitializer(tensor);
  return OkStatus();
}

Status OnnxGraphEditor::AddInitializer(const OnnxInitializer& tensor) {
  if (FindGraphField(kGraphInitializer, kTensorName, tensor.name) >= 0)
    return FailedPreconditionError("initializer " + tensor.name + " exists");
  graph_.push_back(Bytes(kGraphInitializer, EncodeInitializer(tensor)));
  return OkStatus();
}

void OnnxGraphEditor::AddOutput(const std::string& name, int elem_type) {
  const std::string tensor_type =
      SerializeProtoFields({Varint(kTensorTypeElemType, static_cast<uint64_t>(elem_type))});
  const std::string type = SerializeProtoFields({Bytes(kTypeTensorType, tensor_type)});
  graph_.push_back(Bytes(
      kGraphOutput, SerializeProtoFields({Bytes(kValueInfoName, name), Bytes(kValueInfoType, type)})));
}

}  // namespace quantd::peers
