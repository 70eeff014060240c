// A minimal ONNX writer: the protobuf wire format of onnx.proto's ModelProto,
// GraphProto, NodeProto, TensorProto, ValueInfoProto and AttributeProto,
// written by hand so the engine never links libprotobuf.
//
// GraphBuilder collects a graph (inputs, outputs, initializers with raw
// little-endian bytes, nodes with attributes) and serializes it. Initializers
// may go to an external data file (onnx's external_data convention:
// location / offset / length), which models beyond protobuf's 2 GB limit
// need. Field numbers follow onnx/onnx.proto (IR version 7..10). Torch-free.
#ifndef QUANTD_WORKER_EXPORT_ONNX_ONNX_PROTO_H_
#define QUANTD_WORKER_EXPORT_ONNX_ONNX_PROTO_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "worker/common/status.h"

namespace quantd::exporter::onnx {

// Appends protobuf fields to a byte string.
class ProtoWriter {
 public:
  void Varint(int field, uint64_t value);
  void Int64(int field, int64_t value) { Varint(field, static_cast<uint64_t>(value)); }
  void Float(int field, float value);
  void Bytes(int field, std::string_view bytes);
  void Message(int field, const ProtoWriter& message) { Bytes(field, message.data()); }
  void PackedInt64(int field, const std::vector<int64_t>& values);

  const std::string& data() const { return data_; }

 private:
  void Tag(int field, int wire_type);
  void RawVarint(uint64_t v);
  std::string data_;
};

// TensorProto.DataType values.
enum class DataType : int {
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kInt32 = 6,
  kInt64 = 7,
  kBool = 9,
  kFloat16 = 10,
  kBfloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E5M2 = 19,
  kUint4 = 21,
  kInt4 = 22,
};

// A dimension of a graph input / output: a fixed size or a symbolic name.
using Dim = std::variant<int64_t, std::string>;

struct Attribute {
  std::string name;
  std::variant<int64_t, float, std::string, std::vector<int64_t>> value;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) : name_(std::move(name)) {}

  void AddInput(const std::string& name, DataType type, const std::vector<Dim>& shape);
  void AddOutput(const std::string& name, DataType type, const std::vector<Dim>& shape);
  // `raw` holds the elements little-endian; 4-bit types two per byte, the
  // first element in the low nibble. Returns `name`.
  std::string AddInitializer(const std::string& name, DataType type,
                             const std::vector<int64_t>& dims, std::string raw);
  // Appends a node; returns its outputs, named "<name>_out<i>".
  std::vector<std::string> AddNode(const std::string& op_type, const std::string& name,
                                   const std::vector<std::string>& inputs, int num_outputs = 1,
                                   const std::vector<Attribute>& attributes = {});
  // `domain` empty is the default ONNX domain ("com.microsoft" for
  // onnxruntime's contrib operators; ModelInfo::domain_opsets imports it).
  std::vector<std::string> AddNodeWithOutputs(const std::string& op_type, const std::string& name,
                                              const std::vector<std::string>& inputs,
                                              const std::vector<std::string>& outputs,
                                              const std::vector<Attribute>& attributes,
                                              const std::string& domain = "");
  // Single output named `output` (for the graph's outputs).
  std::string OpTo(const std::string& op_type, const std::string& name,
                   const std::vector<std::string>& inputs, const std::string& output,
                   const std::vector<Attribute>& attributes = {});
  // Single-output convenience.
  std::string Op(const std::string& op_type, const std::string& name,
                 const std::vector<std::string>& inputs,
                 const std::vector<Attribute>& attributes = {}) {
    return AddNode(op_type, name, inputs, 1, attributes)[0];
  }

  int64_t initializer_bytes() const { return initializer_bytes_; }

  struct ModelInfo {
    int64_t ir_version = 7;
    int64_t opset = 13;
    std::string producer_name = "quantd";
    std::string producer_version;
    std::string doc_string;
    // Opset imports besides the default domain's: {domain, version}.
    std::vector<std::pair<std::string, int64_t>> domain_opsets;
  };
  // The ModelProto bytes. With `external_data_file` set, initializers of at
  // least `external_threshold` bytes are written to that file (path relative
  // to the model: `external_location`) instead of into the model.
  StatusOr<std::string> Serialize(const ModelInfo& info, const std::string& external_data_file = "",
                                  const std::string& external_location = "",
                                  int64_t external_threshold = 1024) const;

 private:
  struct Initializer {
    std::string name;
    DataType type;
    std::vector<int64_t> dims;
    std::string raw;
  };
  std::string name_;
  std::vector<ProtoWriter> inputs_, outputs_, nodes_;
  std::vector<Initializer> initializers_;
  int64_t initializer_bytes_ = 0;
};

}  // namespace quantd::exporter::onnx

#endif  // QUANTD_WORKER_EXPORT_ONNX_ONNX_PROTO_H_
