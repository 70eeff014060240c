// Reads and edits an ONNX model (ModelProto bytes) at the protobuf wire
// level, for the onnxruntime peer check: list the graph's nodes, add graph
// outputs (so onnxruntime returns intermediate values), and make the small
// edits that the check's mutation cases need (an initializer's value or
// type, a node's input or integer attribute, a node removed).
//
// Fields the editor does not touch are kept as they are on the wire, so
// Parse then Serialize gives the input bytes back. Field numbers follow
// onnx/onnx.proto, as worker/export/onnx_proto.cc writes them.
#ifndef QUANTD_TESTS_PEERS_ONNX_GRAPH_EDIT_H_
#define QUANTD_TESTS_PEERS_ONNX_GRAPH_EDIT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker/common/status.h"

namespace quantd::peers {

// One field of a protobuf message as it is on the wire.
struct ProtoField {
  int number = 0;
  int wire_type = 0;   // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t value = 0;  // wire type 0
  std::string bytes;   // wire types 1 and 5 (little-endian), 2 (the payload)
};

// INVALID_ARGUMENT for bytes that are not a protobuf message (a truncated
// field, an unknown wire type, a varint over 10 bytes).
StatusOr<std::vector<ProtoField>> ParseProtoFields(std::string_view data);
std::string SerializeProtoFields(const std::vector<ProtoField>& fields);

struct OnnxNode {
  std::string name;
  std::string op_type;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// A TensorProto initializer held as raw_data (what quantd's exporter writes).
struct OnnxInitializer {
  std::string name;
  int data_type = 0;  // TensorProto.DataType
  std::vector<int64_t> dims;
  std::string raw;
};

class OnnxGraphEditor {
 public:
  // INVALID_ARGUMENT when the bytes are not a ModelProto with a graph.
  static StatusOr<OnnxGraphEditor> Parse(std::string_view model_bytes);
  std::string Serialize() const;

  // The graph's nodes in order.
  std::vector<OnnxNode> Nodes() const;
  // NOT_FOUND naming the node / initializer / attribute when it is absent;
  // OUT_OF_RANGE for an input index the node does not have.
  Status SetNodeInput(const std::string& node, int index, const std::string& value);
  Status RemoveNode(const std::string& node);
  Status SetIntAttribute(const std::string& node, const std::string& attribute, int64_t value);
  // INVALID_ARGUMENT for an initializer stored other than as raw_data.
  StatusOr<OnnxInitializer> Initializer(const std::string& name) const;
  // Replaces the initializer of that name (written with raw_data).
  Status SetInitializer(const OnnxInitializer& tensor);
  // FAILED_PRECONDITION when an initializer of that name exists.
  Status AddInitializer(const OnnxInitializer& tensor);
  // Adds a graph output of a tensor element type (TensorProto.DataType),
  // shape left unknown.
  void AddOutput(const std::string& name, int elem_type);

 private:
  OnnxGraphEditor() = default;
  // Index in graph_ of the node / initializer named `name`, or -1.
  int FindGraphField(int field_number, int name_field, const std::string& name) const;

  std::vector<ProtoField> model_;  // model_[graph_index_] is re-encoded from graph_
  size_t graph_index_ = 0;
  std::vector<ProtoField> graph_;
};

}  // namespace quantd::peers

#endif  // QUANTD_TESTS_PEERS_ONNX_GRAPH_EDIT_H_
