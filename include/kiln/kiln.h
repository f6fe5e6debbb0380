// The kiln C++ API: load a compiled bundle into a Model, create Sessions, run.
//
//   auto model = kiln::Model::Load("model.kiln");           // StatusOr<shared_ptr<const Model>>
//   auto session = kiln::Session::Create(*model);            // one per thread
//   auto outputs = (*session)->Run({{"x", x}});              // StatusOr<map<name, HostTensor>>
//
// Link the CMake target kiln_api. Thread-safety: see model.h and session.h.
#pragma once

#include "kiln/model.h"
#include "kiln/profile.h"
#include "kiln/session.h"
#include "kiln/types.h"
