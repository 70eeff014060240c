// OnnxGraphEditor against models written by the exporter's own ONNX writer:
// an unedited round trip gives the same bytes, each edit changes exactly the
// field it names, and malformed bytes or absent names are errors.
#include "tests/peers/onnx_graph_edit.h"

#include <gtest/gtest.h>

#include "worker/export/onnx/onnx_proto.h"

namespace quantd::peers {
namespace {

namespace onnx = exporter::onnx;

std::string SmallModel() {
  onnx::GraphBuilder g("g");
  g.AddInput("x", onnx::DataType::kFloat, {int64_t{1}, int64_t{4}});
  g.AddInitializer("s", onnx::DataType::kFloat, {}, std::string("\x00\x00\x80\x3f", 4));
  g.AddInitializer("z", onnx::DataType::kInt8, {}, std::string(1, '\0'));
  const std::string q = g.Op("QuantizeLinear", "/q", {"x", "s", "z"}, {{"axis", int64_t{1}}});
  g.OpTo("DequantizeLinear", "/dq", {q, "s", "z"}, "y");
  g.AddOutput("y", onnx::DataType::kFloat, {int64_t{1}, int64_t{4}});
  StatusOr<std::string> bytes = g.Serialize({});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return *bytes;
}

TEST(OnnxGraphEditTest, RoundTripKeepsTheBytes) {
  const std::string model = SmallModel();
  StatusOr<OnnxGraphEditor> e = OnnxGraphEditor::Parse(model);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->Serialize(), model);
  const std::vector<OnnxNode> nodes = e->Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "/q");
  EXPECT_EQ(nodes[0].op_type, "QuantizeLinear");
  EXPECT_EQ(nodes[0].inputs, (std::vector<std::string>{"x", "s", "z"}));
  EXPECT_EQ(nodes[1].outputs, (std::vector<std::string>{"y"}));
}

TEST(OnnxGraphEditTest, EditsChangeWhatTheyName) {
  StatusOr<OnnxGraphEditor> e = OnnxGraphEditor::Parse(SmallModel());
  ASSERT_TRUE(e.ok()) << e.status();
  StatusOr<OnnxInitializer> z = e->Initializer("z");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->data_type, 3);
  EXPECT_EQ(z->raw, std::string(1, '\0'));
  z->name = "z2";
  z->raw = std::string(1, '\x01');
  ASSERT_TRUE(e->AddInitializer(*z).ok());
  EXPECT_EQ(e->AddInitializer(*z).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->SetNodeInput("/dq", 2, "z2").ok());
  ASSERT_TRUE(e->SetIntAttribute("/q", "axis", 0).ok());
  e->AddOutput(e->Nodes()[0].outputs[0], 3);

  // The edits survive a serialize / parse round trip.
  StatusOr<OnnxGraphEditor> again = OnnxGraphEditor::Parse(e->Serialize());
  ASSERT_TRUE(again.ok()) << again.status();
  const std::vector<OnnxNode> nodes = again->Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].inputs[2], "z2");
  EXPECT_EQ(again->Initializer("z2")->raw, std::string(1, '\x01'));
  EXPECT_EQ(again->Initializer("z")->raw, std::string(1, '\0'));

  ASSERT_TRUE(again->RemoveNode("/q").ok());
  EXPECT_EQ(again->Nodes().size(), 1u);
}

TEST(OnnxGraphEditTest, AbsentNamesAndBadBytesAreErrors) {
  StatusOr<OnnxGraphEditor> e = OnnxGraphEditor::Parse(SmallModel());
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->RemoveNode("/nope").code(), StatusCode::kNotFound);
  EXPECT_EQ(e->Initializer("nope").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e->SetIntAttribute("/q", "nope", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(e->SetNodeInput("/q", 7, "x").code(), StatusCode::kOutOfRange);

  const std::string model = SmallModel();
  EXPECT_FALSE(OnnxGraphEditor::Parse(model.substr(0, model.size() - 3)).ok());
  EXPECT_FALSE(ParseProtoFields(std::string(11, '\xff')).ok());  // varint over 10 bytes
  EXPECT_FALSE(ParseProtoFields(std::string("\x0b", 1)).ok());    // wire type 3
}

}  // namespace
}  // namespace quantd::peers
