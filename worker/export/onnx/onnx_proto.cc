#include "worker/export/onnx/onnx_proto.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace quantd::exporter::onnx {
namespace {

// onnx.proto field numbers.
namespace model_proto {
constexpr int kIrVersion = 1, kProducerName = 2, kProducerVersion = 3, kDocString = 6, kGraph = 7,
              kOpsetImport = 8;
}
namespace opset_id {
constexpr int kDomain = 1, kVersion = 2;
}
namespace graph_proto {
constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node_proto {
constexpr int kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5, kDomain = 7;
}
namespace attribute_proto {
constexpr int kName = 1, kF = 2, kI = 3, kS = 4, kInts = 8, kType = 20;
constexpr int kTypeFloat = 1, kTypeInt = 2, kTypeString = 3, kTypeInts = 7;
}  // namespace attribute_proto
namespace tensor_proto {
constexpr int kDims = 1, kDataType = 2, kName = 8, kRawData = 9, kExternalData = 13,
              kDataLocation = 14;
constexpr int kExternal = 1;
}  // namespace tensor_proto
namespace string_entry {
constexpr int kKey = 1, kValue = 2;
}
namespace value_info {
constexpr int kName = 1, kType = 2;
}
namespace type_proto {
constexpr int kTensorType = 1;
constexpr int kElemType = 1, kShape = 2;  // TypeProto.Tensor
constexpr int kDim = 1;                   // TensorShapeProto
constexpr int kDimValue = 1, kDimParam = 2;
}  // namespace type_proto

constexpr int kVarint = 0, kFixed32 = 5, kLengthDelimited = 2;

ProtoWriter ValueInfo(const std::string& name, DataType type, const std::vector<Dim>& shape) {
  ProtoWriter dims;
  for (const Dim& d : shape) {
    ProtoWriter dim;
    if (const auto* v = std::get_if<int64_t>(&d)) {
      dim.Int64(type_proto::kDimValue, *v);
    } else {
      dim.Bytes(type_proto::kDimParam, std::get<std::string>(d));
    }
    dims.Message(type_proto::kDim, dim);
  }
  ProtoWriter tensor;
  tensor.Int64(type_proto::kElemType, static_cast<int>(type));
  tensor.Message(type_proto::kShape, dims);
  ProtoWriter type_msg;
  type_msg.Message(type_proto::kTensorType, tensor);
  ProtoWriter vi;
  vi.Bytes(value_info::kName, name);
  vi.Message(value_info::kType, type_msg);
  return vi;
}

}  // namespace

void ProtoWriter::RawVarint(uint64_t v) {
  while (v >= 0x80) {
    data_.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  data_.push_back(static_cast<char>(v));
}

void ProtoWriter::Tag(int field, int wire_type) {
  RawVarint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

void ProtoWriter::Varint(int field, uint64_t value) {
  Tag(field, kVarint);
  RawVarint(value);
}

void ProtoWriter::Float(int field, float value) {
  Tag(field, kFixed32);
  char b[4];
  std::memcpy(b, &value, 4);  // little-endian hosts only, as the engine
  data_.append(b, 4);
}

void ProtoWriter::Bytes(int field, std::string_view bytes) {
  Tag(field, kLengthDelimited);
  RawVarint(bytes.size());
  data_.append(bytes.data(), bytes.size());
}

void ProtoWriter::PackedInt64(int field, const std::vector<int64_t>& values) {
  ProtoWriter packed;
  for (int64_t v : values) packed.RawVarint(static_cast<uint64_t>(v));
  Bytes(field, packed.data());
}

void GraphBuilder::AddInput(const std::string& name, DataType type, const std::vector<Dim>& shape) {
  inputs_.push_back(ValueInfo(name, type, shape));
}

void GraphBuilder::AddOutput(const std::string& name, DataType type,
                             const std::vector<Dim>& shape) {
  outputs_.push_back(ValueInfo(name, type, shape));
}

std::string GraphBuilder::AddInitializer(const std::string& name, DataType type,
                                         const std::vector<int64_t>& dims, std::string raw) {
  initializer_bytes_ += static_cast<int64_t>(raw.size());
  initializers_.push_back({name, type, dims, std::move(raw)});
  return name;
}

std::vector<std::string> GraphBuilder::AddNode(const std::string& op_type, const std::string& name,
                                               const std::vector<std::string>& inputs,
                                               int num_outputs,
                                               const std::vector<Attribute>& attributes) {
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i)
    outs.push_back(num_outputs == 1 ? name + "_out" : name + "_out" + std::to_string(i));
  return AddNodeWithOutputs(op_type, name, inputs, outs, attributes);
}

std::string GraphBuilder::OpTo(const std::string& op_type, const std::string& name,
                               const std::vector<std::string>& inputs, const std::string& output,
                               const std::vector<Attribute>& attributes) {
  return AddNodeWithOutputs(op_type, name, inputs, {output}, attributes)[0];
}

std::vector<std::string> GraphBuilder::AddNodeWithOutputs(const std::string& op_type,
                                                          const std::string& name,
                                                          const std::vector<std::string>& inputs,
                                                          const std::vector<std::string>& outs,
                                                          const std::vector<Attribute>& attributes,
                                                          const std::string& domain) {
  ProtoWriter node;
  for (const auto& in : inputs) node.Bytes(node_proto::kInput, in);
  for (const auto& out : outs) node.Bytes(node_proto::kOutput, out);
  node.Bytes(node_proto::kName, name);
  node.Bytes(node_proto::kOpType, op_type);
  for (const Attribute& a : attributes) {
    ProtoWriter attr;
    attr.Bytes(attribute_proto::kName, a.name);
    if (const auto* i = std::get_if<int64_t>(&a.value)) {
      attr.Int64(attribute_proto::kI, *i);
      attr.Int64(attribute_proto::kType, attribute_proto::kTypeInt);
    } else if (const auto* f = std::get_if<float>(&a.value)) {
      attr.Float(attribute_proto::kF, *f);
      attr.Int64(attribute_proto::kType, attribute_proto::kTypeFloat);
    } else if (const auto* s = std::get_if<std::string>(&a.value)) {
      attr.Bytes(attribute_proto::kS, *s);
      attr.Int64(attribute_proto::kType, attribute_proto::kTypeString);
    } else {
      // Repeated int64 attributes are written unpacked, one field each, as
      // protoc's proto2 default.
      for (int64_t v : std::get<std::vector<int64_t>>(a.value))
        attr.Int64(attribute_proto::kInts, v);
      attr.Int64(attribute_proto::kType, attribute_proto::kTypeInts);
    }
    node.Message(node_proto::kAttribute, attr);
  }
  if (!domain.empty()) node.Bytes(node_proto::kDomain, domain);
  nodes_.push_back(std::move(node));
  return outs;
}

StatusOr<std::string> GraphBuilder::Serialize(const ModelInfo& info,
                                              const std::string& external_data_file,
                                              const std::string& external_location,
                                              int64_t external_threshold) const {
  std::FILE* ext = nullptr;
  if (!external_data_file.empty()) {
    ext = std::fopen(external_data_file.c_str(), "wb");
    if (ext == nullptr)
      return FailedPreconditionError("cannot create " + external_data_file + ": " +
                                     std::strerror(errno));
  }
  int64_t offset = 0;
  ProtoWriter graph;
  for (const auto& n : nodes_) graph.Message(graph_proto::kNode, n);
  graph.Bytes(graph_proto::kName, name_);
  for (const auto& init : initializers_) {
    ProtoWriter t;
    // dims are repeated int64 (proto2, unpacked).
    for (int64_t d : init.dims) t.Int64(tensor_proto::kDims, d);
    t.Int64(tensor_proto::kDataType, static_cast<int>(init.type));
    t.Bytes(tensor_proto::kName, init.name);
    const int64_t size = static_cast<int64_t>(init.raw.size());
    if (ext != nullptr && size >= external_threshold) {
      // Offsets aligned to 4 KiB so readers may map each tensor.
      const int64_t aligned = (offset + 4095) / 4096 * 4096;
      if (aligned > offset) {
        std::string pad(static_cast<size_t>(aligned - offset), '\0');
        std::fwrite(pad.data(), 1, pad.size(), ext);
      }
      if (std::fwrite(init.raw.data(), 1, init.raw.size(), ext) != init.raw.size()) {
        std::fclose(ext);
        return Status(StatusCode::kUnavailable, "writing " + external_data_file + " failed");
      }
      for (const auto& [k, v] :
           std::vector<std::pair<std::string, std::string>>{{"location", external_location},
                                                            {"offset", std::to_string(aligned)},
                                                            {"length", std::to_string(size)}}) {
        ProtoWriter entry;
        entry.Bytes(string_entry::kKey, k);
        entry.Bytes(string_entry::kValue, v);
        t.Message(tensor_proto::kExternalData, entry);
      }
      t.Int64(tensor_proto::kDataLocation, tensor_proto::kExternal);
      offset = aligned + size;
    } else {
      t.Bytes(tensor_proto::kRawData, init.raw);
    }
    graph.Message(graph_proto::kInitializer, t);
  }
  if (ext != nullptr && std::fclose(ext) != 0)
    return Status(StatusCode::kUnavailable, "closing " + external_data_file + " failed");
  for (const auto& i : inputs_) graph.Message(graph_proto::kInput, i);
  for (const auto& o : outputs_) graph.Message(graph_proto::kOutput, o);
  if (graph.data().size() >= (uint64_t{2} << 30))
    return ResourceExhaustedError(
        "the ONNX graph is over protobuf's 2 GB limit; write its initializers as external data");

  ProtoWriter model;
  model.Int64(model_proto::kIrVersion, info.ir_version);
  model.Bytes(model_proto::kProducerName, info.producer_name);
  if (!info.producer_version.empty())
    model.Bytes(model_proto::kProducerVersion, info.producer_version);
  if (!info.doc_string.empty()) model.Bytes(model_proto::kDocString, info.doc_string);
  model.Message(model_proto::kGraph, graph);
  ProtoWriter opset;
  opset.Bytes(opset_id::kDomain, "");
  opset.Int64(opset_id::kVersion, info.opset);
  model.Message(model_proto::kOpsetImport, opset);
  for (const auto& [domain, version] : info.domain_opsets) {
    ProtoWriter extra;
    extra.Bytes(opset_id::kDomain, domain);
    extra.Int64(opset_id::kVersion, version);
    model.Message(model_proto::kOpsetImport, extra);
  }
  return model.data();
}

}  // namespace quantd::exporter::onnx
