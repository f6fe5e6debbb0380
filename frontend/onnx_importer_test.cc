// Tests for the ONNX importer on bad and edge-case input: unreadable files, external
// data, unsupported ops and dtypes, bad attributes and shapes, dynamic dims, opsets,
// legacy node forms, and EvaluateGraph's checks on its feeds.
#include "frontend/onnx_importer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/onnx_tensor.h"
#include "graph/evaluate.h"
#include "frontend/onnx_test_util.h"
#include "onnx/onnx_pb.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace onnx_test;  // NOLINT: model builders
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// y = Relu(x + w), x: f32[2,3] input, w: f32[2,3] initializer.
onnx::ModelProto AddReluModel() {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {2, 3});
  AddOutput(m, "y", {2, 3});
  AddFloatInitializer(m, "w", {2, 3}, {1, -2, 3, -4, 5, -6});
  AddNode(m, "Add", {"x", "w"}, {"sum"}, "add_1");
  AddNode(m, "Relu", {"sum"}, {"y"}, "relu_1");
  return m;
}

// --- Files ------------------------------------------------------------------

// A fresh folder for the running test, under the gtest temp dir.
std::string TestDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(::testing::TempDir()) / "kiln_onnx_importer_test" /
                       absl::StrCat(info->test_suite_name(), ".", info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string WriteBytes(const std::string& dir, const std::string& file, const std::string& bytes) {
  const std::string path = (fs::path(dir) / file).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  EXPECT_TRUE(out) << "cannot write " << path;
  return path;
}

std::string WriteModel(const std::string& dir, const std::string& file, const onnx::ModelProto& m) {
  return WriteBytes(dir, file, m.SerializeAsString());
}

Tensor F32(Shape shape, const std::vector<float>& values) { return Tensor::FromFloat(DType::kFloat32, shape, values); }

// --- Unreadable files -------------------------------------------------------

TEST(OnnxImporterFileTest, ValidModelImports) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "ok.onnx", AddReluModel());
  auto graph = ImportOnnxFile(path);
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = EvaluateGraph(**graph, {{"x", F32({2, 3}, {0, 0, 0, 1, 1, 1})}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{1, 0, 3, 0, 6, 0}));
}

TEST(OnnxImporterFileTest, TruncatedModelNamesFile) {
  const std::string dir = TestDir();
  onnx::ModelProto m = AddReluModel();
  // A larger initializer so that half the file lands inside the graph.
  AddFloatInitializer(m, "unused_weight", {64}, std::vector<float>(64, 0.5f));
  const std::string bytes = m.SerializeAsString();
  const std::string path = WriteBytes(dir, "truncated.onnx", bytes.substr(0, bytes.size() / 2));
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("not a valid ONNX model"),
                                              HasSubstr("truncated or corrupt")));
}

TEST(OnnxImporterFileTest, CorruptBytesNameFile) {
  const std::string dir = TestDir();
  // 0x07 is a tag with wire type 7, which protobuf never accepts.
  const std::string path = WriteBytes(dir, "corrupt.onnx", std::string("\x07\xff\xff\xff garbage", 13));
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("not a valid ONNX model")));
}

TEST(OnnxImporterFileTest, CorruptedMiddleOfValidModelNamesFile) {
  const std::string dir = TestDir();
  std::string bytes = AddReluModel().SerializeAsString();
  // Overwrite the middle with 0xff: a run of unterminated varints.
  for (size_t i = bytes.size() / 3; i < 2 * bytes.size() / 3; ++i) bytes[i] = '\xff';
  const std::string path = WriteBytes(dir, "corrupt_middle.onnx", bytes);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("not a valid ONNX model")));
}

TEST(OnnxImporterFileTest, ModelWithoutGraphIsRejected) {
  const std::string dir = TestDir();
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("no graph here");
  const std::string path = WriteModel(dir, "no_graph.onnx", m);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("no graph")));
}

TEST(OnnxImporterFileTest, EmptyFileNamesFile) {
  const std::string dir = TestDir();
  const std::string path = WriteBytes(dir, "empty.onnx", "");
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("empty")));
}

TEST(OnnxImporterFileTest, MissingFileIsNotFound) {
  const std::string path = (fs::path(TestDir()) / "no_such_model.onnx").string();
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("cannot open")));
}

// --- External data ----------------------------------------------------------

// The model of AddReluModel() with w (renamed kExternalName) stored in
// `location` at `offset`, `length`.
constexpr char kExternalName[] = "ext_weight";

// Empty `offset` / `length` leave the key out.
onnx::ModelProto ExternalWeightModel(const std::string& location, const std::string& offset,
                                     const std::string& length) {
  onnx::ModelProto m = AddReluModel();
  m.mutable_graph()->mutable_node(0)->set_input(1, kExternalName);
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->set_name(kExternalName);
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const std::string& key, const std::string& value) {
    auto* kv = w->add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
  return m;
}

onnx::ModelProto ExternalWeightModel(const std::string& location, int64_t offset, int64_t length) {
  return ExternalWeightModel(location, absl::StrCat(offset), absl::StrCat(length));
}

// Runs with and without ONNX's checker (which checks external files too).
class OnnxImporterExternalDataTest : public ::testing::TestWithParam<bool> {
 protected:
  ImportOptions Options() const {
    ImportOptions options;
    options.run_onnx_checker = GetParam();
    return options;
  }
};

TEST_P(OnnxImporterExternalDataTest, PresentDataImportsWithValues) {
  const std::string dir = TestDir();
  const std::vector<float> w = {0.5f, -1.5f, 2.5f, -3.5f, 4.5f, -5.5f};
  // 16 bytes of padding in front, so the offset matters.
  WriteBytes(dir, "weights.bin", std::string(16, '\x7f') + FloatBytes(w) + std::string(8, '\x7f'));
  const std::string path = WriteModel(dir, "external.onnx", ExternalWeightModel("weights.bin", 16, 24));
  // The model's folder is not the working directory: data is found beside the model.
  ASSERT_NE(fs::current_path(), fs::path(dir));
  auto graph = ImportOnnxFile(path, Options());
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Value* wv = (*graph)->FindValue(kExternalName);
  ASSERT_NE(wv, nullptr);
  ASSERT_TRUE(wv->is_constant());
  EXPECT_EQ(wv->constant().shape(), (Shape{2, 3}));
  EXPECT_EQ(wv->constant().ToFloat(), w);
  auto out = EvaluateGraph(**graph, {{"x", F32({2, 3}, {0, 2, 0, 4, 0, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{0.5f, 0.5f, 2.5f, 0.5f, 4.5f, 0.5f}));
}

TEST_P(OnnxImporterExternalDataTest, MissingFileNamesTensorAndFile) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "external_missing.onnx", ExternalWeightModel("missing_weights.bin", 0, 24));
  auto graph = ImportOnnxFile(path, Options());
  ASSERT_FALSE(graph.ok());
  // kiln says NotFound; ONNX's checker, where it runs first, says InvalidArgument.
  EXPECT_THAT(graph.status().code(),
              ::testing::AnyOf(absl::StatusCode::kNotFound, absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr(kExternalName), HasSubstr("missing_weights.bin")));
  if (!GetParam()) {
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(Msg(graph.status()), HasSubstr("not found"));
  }
}

TEST_P(OnnxImporterExternalDataTest, RangeBeyondFileNamesTensorAndRange) {
  const std::string dir = TestDir();
  WriteBytes(dir, "short_weights.bin", FloatBytes({1, 2, 3, 4}));  // 16 bytes
  const std::string path = WriteModel(dir, "external_short.onnx", ExternalWeightModel("short_weights.bin", 8, 24));
  auto graph = ImportOnnxFile(path, Options());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kOutOfRange) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr(kExternalName), HasSubstr("short_weights.bin"),
                                         HasSubstr("[8, 32)"), HasSubstr("16 bytes")));
}

TEST_P(OnnxImporterExternalDataTest, LocationOutsideModelFolderIsRejected) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "external_escape.onnx", ExternalWeightModel("../weights.bin", 0, 24));
  auto graph = ImportOnnxFile(path, Options());
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr(kExternalName), HasSubstr("../weights.bin")));
}

// Bad offset/length values and locations: an error naming the tensor, never a
// crash (these used to throw out of std::stoll or allocate absurd buffers).
struct BadExternalData {
  std::string location, offset, length;
  std::string expected;  // in kiln's own message
};

TEST_P(OnnxImporterExternalDataTest, BadOffsetLengthOrLocationIsAnError) {
  const std::string dir = TestDir();
  WriteBytes(dir, "weights.bin", FloatBytes({1, 2, 3, 4, 5, 6}));  // 24 bytes
  fs::create_directories(fs::path(dir) / "subdir");
  const std::vector<BadExternalData> cases = {
      {"weights.bin", "abc", "24", "offset 'abc' is not a non-negative integer"},
      {"weights.bin", "99999999999999999999999", "", "offset '99999999999999999999999'"},
      {"weights.bin", "-4", "24", "offset '-4'"},
      {"weights.bin", "0", "-5", "length '-5'"},
      {"weights.bin", "9223372036854775800", "24", "lies outside"},
      {"weights.bin", "8", "9223372036854775800", "lies outside"},
      {"weights.bin", "4", "", "raw data has 20 bytes"},
      {"subdir", "0", "24", "'subdir' is not a regular file"},
      {".", "", "", "'.' is not a regular file"},
      {"", "0", "24", "no location"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(absl::StrCat("location '", c.location, "' offset '", c.offset, "' length '", c.length, "'"));
    const std::string path = WriteModel(dir, "bad_external.onnx", ExternalWeightModel(c.location, c.offset, c.length));
    auto graph = ImportOnnxFile(path, Options());
    ASSERT_FALSE(graph.ok());
    EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr(kExternalName)));
    if (!GetParam()) {
      EXPECT_THAT(Msg(graph.status()), HasSubstr(c.expected));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OnnxImporter, OnnxImporterExternalDataTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithOnnxChecker" : "KilnOnly"; });

// --- Unsupported ops and types ----------------------------------------------

TEST(OnnxImporterUnsupportedTest, ReportsAllUnknownOpsAtOnce) {
  const std::string dir = TestDir();
  onnx::ModelProto m = NewModel();
  auto* custom = m.add_opset_import();
  custom->set_domain("com.example");
  custom->set_version(3);
  AddInput(m, "x", {2, 3});
  AddOutput(m, "y", {2, 3});
  AddNode(m, "FrobnicateA", {"x"}, {"a"}, "frob_first");
  AddNode(m, "Relu", {"a"}, {"b"}, "relu_ok");
  AddNode(m, "FrobnicateA", {"b"}, {"c"}, "frob_second");
  AddNode(m, "WibbleB", {"c"}, {"d"}, "wibble_only");
  AddNode(m, "Relu", {"d"}, {"e"}, "")->set_domain("com.example");
  AddNode(m, "Relu", {"e"}, {"y"}, "relu_last");
  const std::string path = WriteModel(dir, "unknown_ops.onnx", m);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
  const std::string msg(graph.status().message());
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("3 unsupported op types (4 nodes)"));
  EXPECT_THAT(msg, HasSubstr("FrobnicateA (opset 17) x2: frob_first, frob_second"));
  EXPECT_THAT(msg, HasSubstr("WibbleB (opset 17) x1: wibble_only"));
  // A known op type in a foreign domain is unsupported too, with its own opset;
  // an unnamed node is named by its position.
  EXPECT_THAT(msg, HasSubstr("com.example::Relu (opset 3) x1: #4"));
  EXPECT_THAT(msg, AllOf(Not(HasSubstr("relu_ok")), Not(HasSubstr("relu_last"))));
}

TEST(OnnxImporterUnsupportedTest, FindUnsupportedOpsGroupsByOpType) {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {2});
  AddOutput(m, "y", {2});
  AddNode(m, "NoSuchOp", {"x"}, {"a"}, "n1");
  AddNode(m, "NoSuchOp", {"a"}, {"y"}, "n2");
  const auto ops = FindUnsupportedOps(m);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].op_type, "NoSuchOp");
  EXPECT_EQ(ops[0].opset, 17);
  EXPECT_EQ(ops[0].node_names, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_TRUE(FindUnsupportedOps(AddReluModel()).empty());
  EXPECT_EQ(FormatUnsupportedOps({}), "");
}

// float64 is computed in float32: a DOUBLE input, initializer and Cast target
// import as f32.
TEST(OnnxImporterUnsupportedTest, DoubleImportsAsFloat) {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x_double", {2}, onnx::TensorProto::DOUBLE);
  AddOutput(m, "y", {2}, onnx::TensorProto::DOUBLE);
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::DOUBLE);
  w->add_dims(2);
  w->add_double_data(0.25);
  w->add_double_data(-4.0);
  AddNode(m, "Mul", {"x_double", "w"}, {"p"}, "mul_1");
  AddIntAttr(AddNode(m, "Cast", {"p"}, {"y"}, "cast_1"), "to", onnx::TensorProto::DOUBLE);
  auto graph = ImportOnnxModel(m, ".");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->inputs()[0]->dtype(), DType::kFloat32);
  EXPECT_EQ((*graph)->outputs()[0]->dtype(), DType::kFloat32);
  auto out = EvaluateGraph(**graph, {{"x_double", F32({2}, {2.f, 3.f})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{0.5f, -12.f}));
}

TEST(OnnxImporterUnsupportedTest, UnsupportedElementTypeIsUnimplemented) {
  const std::string dir = TestDir();
  onnx::ModelProto m = NewModel();
  AddInput(m, "x_u64", {2, 3}, onnx::TensorProto::UINT64);
  AddOutput(m, "y", {2, 3}, onnx::TensorProto::UINT64);
  AddNode(m, "Relu", {"x_u64"}, {"y"}, "relu_1");
  const std::string path = WriteModel(dir, "u64.onnx", m);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("input 'x_u64'"), HasSubstr("UINT64")));
}

// --- Bad attributes and shapes ------------------------------------------------

// Conv on x: f32[1,1,4,4] with w: f32[1,1,2,2], `strides` given as a float.
onnx::ModelProto ConvWithFloatStrides() {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {1, 1, 4, 4});
  AddOutput(m, "y", {1, 1, 3, 3});
  AddFloatInitializer(m, "w", {1, 1, 2, 2}, {1, 1, 1, 1});
  AddFloatAttr(AddNode(m, "Conv", {"x", "w"}, {"y"}, "conv_bad_strides"), "strides", 2.0f);
  return m;
}

TEST(OnnxImporterAttributeTest, WrongAttributeTypeNamesNodeAndAttribute) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "conv_float_strides.onnx", ConvWithFloatStrides());
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("conv_bad_strides"), HasSubstr("strides")));
}

TEST(OnnxImporterAttributeTest, WrongAttributeTypeWithoutOnnxChecker) {
  ImportOptions options;
  options.run_onnx_checker = false;  // kiln's own op definitions must catch it too
  auto graph = ImportOnnxModel(ConvWithFloatStrides(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("conv_bad_strides"), HasSubstr("strides")));
}

onnx::ModelProto BinaryOpModel(const std::string& op, const std::string& node_name, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  onnx::ModelProto m = NewModel();
  AddInput(m, "a", a);
  AddInput(m, "b", b);
  AddOutput(m, "y", {-1, -1});
  AddNode(m, op, {"a", "b"}, {"y"}, node_name);
  return m;
}

// Runs with and without ONNX's checker and shape inference: either way the
// message must name the node.
class OnnxImporterShapeTest : public ::testing::TestWithParam<bool> {};

TEST_P(OnnxImporterShapeTest, AddOfIncompatibleShapesNamesNode) {
  ImportOptions options;
  options.run_onnx_checker = GetParam();
  auto graph = ImportOnnxModel(BinaryOpModel("Add", "add_mismatch", {2, 3}, {4, 5}), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), HasSubstr("add_mismatch"));
}

TEST_P(OnnxImporterShapeTest, MatMulWithMismatchedKNamesNode) {
  ImportOptions options;
  options.run_onnx_checker = GetParam();
  auto graph = ImportOnnxModel(BinaryOpModel("MatMul", "matmul_bad_k", {2, 3}, {4, 5}), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), HasSubstr("matmul_bad_k"));
}

// Regression (found by the fuzzer): ONNX 1.12's shape inference segfaults on a
// Conv or ConvTranspose whose input has rank < 3. kiln's inference runs first and
// must reject it with a message, the ONNX cross-check enabled or not.
TEST_P(OnnxImporterShapeTest, ConvOnRankTwoInputIsRejectedNotCrashed) {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    onnx::ModelProto m = NewModel(11);
    AddInput(m, "x", {1, 3});
    AddFloatInitializer(m, "w", {1, 2, 3}, std::vector<float>(6, 1.f));
    AddOutput(m, "y", {-1, -1});
    AddNode(m, op, {"x", "w"}, {"y"}, "rank2_conv");
    ImportOptions options;
    options.run_onnx_checker = GetParam();
    auto graph = ImportOnnxModel(m, TestDir(), options);
    ASSERT_FALSE(graph.ok()) << op;
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
    EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("rank2_conv"), HasSubstr("f32[1,3]"))) << op;
  }
}

INSTANTIATE_TEST_SUITE_P(OnnxImporter, OnnxImporterShapeTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "WithOnnxChecker" : "KilnOnly"; });

TEST(OnnxImporterShapeFileTest, ShapeErrorNamesFileAndNode) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "bad_add.onnx", BinaryOpModel("Add", "add_mismatch", {2, 3}, {4, 5}));
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("add_mismatch")));
}

TEST(OnnxImporterShapeFileTest, UndefinedNodeInputIsRejected) {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {2});
  AddOutput(m, "y", {2});
  AddNode(m, "Add", {"x", "ghost"}, {"y"}, "add_ghost");
  for (bool checker : {true, false}) {
    ImportOptions options;
    options.run_onnx_checker = checker;
    auto graph = ImportOnnxModel(m, TestDir(), options);
    ASSERT_FALSE(graph.ok());
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
    EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("add_ghost"), HasSubstr("ghost"))) << "checker=" << checker;
  }
}

TEST(OnnxImporterShapeFileTest, InitializerRawDataSizeMismatchNamesTensor) {
  const std::string dir = TestDir();
  onnx::ModelProto m = AddReluModel();
  m.mutable_graph()->mutable_initializer(0)->set_raw_data(FloatBytes({1, 2, 3, 4, 5}));  // 20 bytes, needs 24
  const std::string path = WriteModel(dir, "bad_raw.onnx", m);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("20 bytes"), HasSubstr("needs 24")));
}

// --- Dynamic input dims ---------------------------------------------------------

// y = Relu(x), x: f32[batch, 3].
onnx::ModelProto DynamicBatchModel() {
  onnx::ModelProto m = NewModel();
  AddInput(m, "tokens", {-1, 3}, onnx::TensorProto::FLOAT, {"batch"});
  AddOutput(m, "y", {-1, 3}, onnx::TensorProto::FLOAT, {"batch"});
  AddNode(m, "Relu", {"tokens"}, {"y"}, "relu_1");
  return m;
}

TEST(OnnxImporterDynamicShapeTest, DynamicDimWithoutInputShapeNamesInputDimAndParam) {
  const std::string dir = TestDir();
  const std::string path = WriteModel(dir, "dynamic.onnx", DynamicBatchModel());
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr(path), HasSubstr("input 'tokens' dim 0"),
                                              HasSubstr("'batch'"), HasSubstr("--dim batch=N")));
}

// x: f32[batch, seq], m: i64[batch, seq, 2], z: f32[n]: every named dim unknown is
// reported at once.
onnx::ModelProto TwoNamedDimsModel() {
  onnx::ModelProto m = NewModel();
  AddInput(m, "x", {-1, -1}, onnx::TensorProto::FLOAT, {"batch", "seq"});
  AddInput(m, "m", {-1, -1, 2}, onnx::TensorProto::INT64, {"batch", "seq"});
  AddOutput(m, "y", {-1, -1}, onnx::TensorProto::FLOAT, {"batch", "seq"});
  AddNode(m, "Relu", {"x"}, {"y"}, "relu_1");
  return m;
}

TEST(OnnxImporterDynamicShapeTest, EveryUnknownDimIsNamedAtOnce) {
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir());
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()),
              AllOf(HasSubstr("'batch' (input 'x' dim 0, input 'm' dim 0)"), HasSubstr("'seq' (input 'x' dim 1, "),
                    HasSubstr("--dim batch=N --dim seq=N")));
  ImportOptions options;
  options.dims["batch"] = 2;
  graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("'seq'"), Not(HasSubstr("'batch'"))));
}

TEST(OnnxImporterDynamicShapeTest, DimsByNameFixEveryInputDimOfThatName) {
  ImportOptions options;
  options.dims = {{"batch", 2}, {"seq", 5}};
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->inputs()[0]->shape(), (Shape{2, 5}));
  EXPECT_EQ((*graph)->inputs()[1]->shape(), (Shape{2, 5, 2}));
}

TEST(OnnxImporterDynamicShapeTest, DimNoInputHasIsRejected) {
  ImportOptions options;
  options.dims = {{"batch", 2}, {"seq", 5}, {"sequence", 5}};
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), HasSubstr("--dim sequence: no dynamic input dim has that name"));
}

TEST(OnnxImporterDynamicShapeTest, UnnamedDynamicDimIsReported) {
  onnx::ModelProto m = DynamicBatchModel();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->Clear();
  auto graph = ImportOnnxModel(m, TestDir());
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("input 'tokens' dim 0"), HasSubstr("--input-shape tokens=")));
}

TEST(OnnxImporterDynamicShapeTest, InputShapesFixDynamicDims) {
  ImportOptions options;
  options.input_shapes["tokens"] = {4, 3};
  auto graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ((*graph)->inputs().size(), 1u);
  EXPECT_EQ((*graph)->inputs()[0]->shape(), (Shape{4, 3}));
  ASSERT_EQ((*graph)->outputs().size(), 1u);
  EXPECT_TRUE((*graph)->outputs()[0]->has_type());
  EXPECT_EQ((*graph)->outputs()[0]->shape(), (Shape{4, 3}));
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i) - 6;
  auto out = EvaluateGraph(**graph, {{"tokens", F32({4, 3}, x)}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].ToFloat()[0], 0.f);
  EXPECT_EQ((*out)[0].ToFloat()[11], 5.f);
}

TEST(OnnxImporterDynamicShapeTest, InputShapeForUnknownInputIsRejected) {
  ImportOptions options;
  options.input_shapes["tokens"] = {4, 3};
  options.input_shapes["no_such_input"] = {1};
  auto graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument) << graph.status();
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("'no_such_input'"), HasSubstr("not a model input"),
                                              HasSubstr("inputs: tokens")));
}

TEST(OnnxImporterDynamicShapeTest, InputShapeOfWrongRankIsRejected) {
  ImportOptions options;
  options.input_shapes["tokens"] = {4, 3, 1};
  auto graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("tokens"), HasSubstr("rank 3"), HasSubstr("rank 2")));
}

TEST(OnnxImporterDynamicShapeTest, InputShapeContradictingFixedDimIsRejected) {
  ImportOptions options;
  options.input_shapes["tokens"] = {4, 5};  // the model fixes dim 1 to 3
  auto graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("tokens"), HasSubstr("dim 1"), HasSubstr("3")));
}

// --input-shape with ranges (issue 34): a ranged dim becomes the symbol its
// dim_param names, shared by every input that names it; an unnamed one gets
// `<input>_<d>`; fixed sizes in the same spec fix their dims.
TEST(OnnxImporterDynamicShapeTest, InputShapeRangesNameTheirSymbols) {
  ImportOptions options;
  options.input_shape_ranges["x"] = {{1, 4}, {1, 64, 16}};  // seq=1..64:16, an opt size to tune for
  options.input_shape_ranges["m"] = {{1, 4}, {1, 64}, {2, 2}};
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ((*graph)->dim_symbols().size(), 2u);
  EXPECT_EQ((*graph)->dim_symbols()[0].name, "batch");  // m's dims first (the specs by name)
  EXPECT_EQ((*graph)->dim_symbols()[1].name, "seq");
  EXPECT_EQ((*graph)->dim_symbols()[0].opt, 0);
  EXPECT_EQ((*graph)->dim_symbols()[1].opt, 16) << "one input's opt is the symbol's";
  EXPECT_EQ((*graph)->inputs()[0]->shape(), (Shape{4, 64}));  // the largest case

  onnx::ModelProto unnamed = DynamicBatchModel();
  unnamed.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->Clear();
  ImportOptions one;
  one.input_shape_ranges["tokens"] = {{2, 8}, {3, 3}};
  graph = ImportOnnxModel(unnamed, TestDir(), one);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ((*graph)->dim_symbols().size(), 1u);
  EXPECT_EQ((*graph)->dim_symbols()[0].name, "tokens_0");
  EXPECT_EQ((*graph)->dim_symbols()[0].min, 2);
  EXPECT_EQ((*graph)->dim_symbols()[0].max, 8);
}

// A range of one value is that fixed size (`--dim batch=1..1`, `--input-shape
// tokens=1..1x3`): no symbol, the graph is static.
TEST(OnnxImporterDynamicShapeTest, RangeOfOneValueIsAFixedSize) {
  ImportOptions options;
  options.dim_ranges = {{"batch", 1, 1}, {"seq", 1, 64}};
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ((*graph)->dim_symbols().size(), 1u);
  EXPECT_EQ((*graph)->dim_symbols()[0].name, "seq");
  EXPECT_EQ((*graph)->inputs()[0]->shape(), (Shape{1, 64}));
  ImportOptions one;
  one.input_shape_ranges["tokens"] = {{2, 2}, {3, 3}};
  graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), one);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE((*graph)->dim_symbols().empty());
  EXPECT_FALSE((*graph)->is_dynamic());
  EXPECT_EQ((*graph)->inputs()[0]->shape(), (Shape{2, 3}));
}

TEST(OnnxImporterDynamicShapeTest, InputShapeRangesThatDisagreeOrRangeAFixedDimAreErrors) {
  ImportOptions options;
  options.input_shape_ranges["x"] = {{1, 4}, {1, 64}};
  options.input_shape_ranges["m"] = {{1, 4}, {1, 32}, {2, 2}};
  auto graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), AllOf(HasSubstr("dim 1 (seq) is given 1..64 here and 1..32 elsewhere")));
  options.input_shape_ranges["x"] = {{1, 4}, {1, 64, 16}};
  options.input_shape_ranges["m"] = {{1, 4}, {1, 64, 32}, {2, 2}};
  graph = ImportOnnxModel(TwoNamedDimsModel(), TestDir(), options);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), HasSubstr("dim 1 (seq) is given 1..64:16 here and 1..64:32 elsewhere"));
  ImportOptions fixed;
  fixed.input_shape_ranges["tokens"] = {{1, 4}, {1, 3}};  // the model fixes dim 1 to 3
  graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), fixed);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), HasSubstr("--input-shape tokens: dim 1 is fixed to 3 by the model"));
  ImportOptions both;
  both.input_shape_ranges["tokens"] = {{1, 4}, {3, 3}};
  both.dim_ranges = {{"batch", 1, 8}};
  graph = ImportOnnxModel(DynamicBatchModel(), TestDir(), both);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(Msg(graph.status()), HasSubstr("is given 1..4 here and 1..8 elsewhere"));
}

// --- Opsets and legacy node forms ------------------------------------------------

TEST(OnnxImporterOpsetTest, OpsetTooOldIsUnimplemented) {
  onnx::ModelProto m = AddReluModel();
  m.mutable_opset_import(0)->set_version(kMinOpset - 1);
  const std::string path = WriteModel(TestDir(), "opset_old.onnx", m);
  auto graph = ImportOnnxFile(path);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
  EXPECT_THAT(Msg(graph.status()),
              AllOf(HasSubstr(path), HasSubstr(absl::StrCat("opset ", kMinOpset - 1)),
                    HasSubstr(absl::StrCat(kMinOpset, " to ", kMaxOpset))));
}

TEST(OnnxImporterOpsetTest, OpsetTooNewIsUnimplemented) {
  onnx::ModelProto m = AddReluModel();
  m.mutable_opset_import(0)->set_version(kMaxOpset + 1);
  auto graph = ImportOnnxModel(m, TestDir());
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
  EXPECT_THAT(Msg(graph.status()), HasSubstr(absl::StrCat("opset ", kMaxOpset + 1)));
}

TEST(OnnxImporterOpsetTest, MissingDefaultOpsetMeansOpset1) {
  onnx::ModelProto m = AddReluModel();
  m.clear_opset_import();
  EXPECT_EQ(DefaultOpset(m), 1);
}

TEST(OnnxImporterLegacyTest, Softmax11CoercesToTwoDims) {
  // Opset < 13: Softmax(axis=1) on [2,3,4] normalises over the flattened 3*4
  // elements of each batch row, not over axis 1 alone.
  onnx::ModelProto m = NewModel(11);
  AddInput(m, "x", {2, 3, 4});
  AddOutput(m, "y", {2, 3, 4});
  AddIntAttr(AddNode(m, "Softmax", {"x"}, {"y"}, "softmax_legacy"), "axis", 1);
  auto graph = ImportOnnxModel(m, TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 0.1f * static_cast<float>(i / 5);
  auto out = EvaluateGraph(**graph, {{"x", F32({2, 3, 4}, x)}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), (Shape{2, 3, 4}));
  const std::vector<float> y = (*out)[0].ToFloat();
  for (int b = 0; b < 2; ++b) {
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < 12; ++i) max = std::max<double>(max, x[b * 12 + i]);
    for (int i = 0; i < 12; ++i) sum += std::exp(x[b * 12 + i] - max);
    double total = 0;
    for (int i = 0; i < 12; ++i) {
      const double expected = std::exp(x[b * 12 + i] - max) / sum;
      EXPECT_NEAR(y[b * 12 + i], expected, 1e-6) << "b=" << b << " i=" << i;
      total += y[b * 12 + i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(OnnxImporterLegacyTest, Squeeze11AxesAttributeIsImported) {
  onnx::ModelProto m = NewModel(11);
  AddInput(m, "x", {1, 3, 1, 2});
  AddOutput(m, "y", {3, 2});
  AddIntsAttr(AddNode(m, "Squeeze", {"x"}, {"y"}, "squeeze_legacy"), "axes", {0, -2});
  auto graph = ImportOnnxModel(m, TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->outputs()[0]->shape(), (Shape{3, 2}));
  auto out = EvaluateGraph(**graph, {{"x", F32({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  EXPECT_EQ((*out)[0].ToFloat(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// --- EvaluateGraph feeds --------------------------------------------------------

TEST(OnnxImporterEvaluateTest, MissingInputNamesInputAndType) {
  auto graph = ImportOnnxModel(AddReluModel(), TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = EvaluateGraph(**graph, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(out.status()), AllOf(HasSubstr("missing input 'x'"), HasSubstr("f32[2,3]")));
}

TEST(OnnxImporterEvaluateTest, MisshapedInputNamesInputAndBothTypes) {
  auto graph = ImportOnnxModel(AddReluModel(), TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = EvaluateGraph(**graph, {{"x", F32({3, 2}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(out.status()), AllOf(HasSubstr("input 'x'"), HasSubstr("f32[3,2]"), HasSubstr("f32[2,3]")));
}

TEST(OnnxImporterEvaluateTest, WrongDtypeInputNamesBothTypes) {
  auto graph = ImportOnnxModel(AddReluModel(), TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = EvaluateGraph(**graph, {{"x", Tensor::FromFloat(DType::kFloat16, {2, 3}, {1, 2, 3, 4, 5, 6})}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(Msg(out.status()), AllOf(HasSubstr("input 'x'"), HasSubstr("f16[2,3]"), HasSubstr("f32[2,3]")));
}

TEST(OnnxImporterEvaluateTest, FeedThatIsNotAnInputIsRejected) {
  auto graph = ImportOnnxModel(AddReluModel(), TestDir());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto out = EvaluateGraph(**graph, {{"x", F32({2, 3}, {1, 2, 3, 4, 5, 6})}, {"bogus", F32({1}, {0})}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(Msg(out.status()), HasSubstr("'bogus'"));
}

// --- Helpers ------------------------------------------------------------------------

TEST(OnnxImporterHelpersTest, ParseShapeSpec) {
  EXPECT_EQ(*ParseShapeSpec("1x128"), (Shape{1, 128}));
  EXPECT_EQ(*ParseShapeSpec("2,3,4"), (Shape{2, 3, 4}));
  EXPECT_EQ(*ParseShapeSpec("scalar"), Shape{});
  auto bad = ParseShapeSpec("1xfoo");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(Msg(bad.status()), HasSubstr("1xfoo"));
  EXPECT_FALSE(ParseShapeSpec("1x-2").ok());
}

TEST(OnnxImporterHelpersTest, ModelDir) {
  EXPECT_EQ(ModelDir("model.onnx"), ".");
  EXPECT_EQ(ModelDir("a/b/model.onnx"), "a/b");
}

}  // namespace
}  // namespace kiln
