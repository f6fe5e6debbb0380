// Builders of small ONNX models for the frontend's tests. Header-only, for tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_test {

inline onnx::ModelProto NewModel(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(opset >= 15 ? 8 : 7);
  m.set_producer_name("kiln-importer-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("test_graph");
  return m;
}

// `dims`: >= 0 is a fixed dim; < 0 is dynamic, named by `params[i]` when given.
inline void SetTensorType(onnx::ValueInfoProto* vi, const std::string& name, int32_t elem_type,
                   const std::vector<int64_t>& dims, const std::vector<std::string>& params = {}) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = shape->add_dim();
    if (dims[i] >= 0) {
      d->set_dim_value(dims[i]);
    } else if (i < params.size()) {
      d->set_dim_param(params[i]);
    }
  }
}

inline void AddInput(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
              int32_t elem_type = onnx::TensorProto::FLOAT, const std::vector<std::string>& params = {}) {
  SetTensorType(m.mutable_graph()->add_input(), name, elem_type, dims, params);
}

inline void AddOutput(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
               int32_t elem_type = onnx::TensorProto::FLOAT, const std::vector<std::string>& params = {}) {
  SetTensorType(m.mutable_graph()->add_output(), name, elem_type, dims, params);
}

// Status messages as std::string, which gmock prints readably.
inline std::string Msg(const absl::Status& status) { return std::string(status.message()); }

inline onnx::NodeProto* AddNode(onnx::ModelProto& m, const std::string& op_type, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op_type);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

inline void AddIntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& values) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

inline void AddIntAttr(onnx::NodeProto* n, const std::string& name, int64_t value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

inline void AddFloatAttr(onnx::NodeProto* n, const std::string& name, float value) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

inline std::string FloatBytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

inline onnx::TensorProto* AddFloatInitializer(onnx::ModelProto& m, const std::string& name, const std::vector<int64_t>& dims,
                                       const std::vector<float>& values) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(FloatBytes(values));
  return t;
}

}  // namespace kiln::onnx_test
