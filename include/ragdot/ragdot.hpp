// ragdot: ragged dot (jax.lax.ragged_dot_general) as a Group-GEMM.
//   describe  -> RaggedDot::create (op.hpp)
//   plan      -> make_plan (plan.hpp)
//   execute   -> Plan::execute
#pragma once

#include "ragdot/dtype.hpp"
#include "ragdot/moe.hpp"
#include "ragdot/op.hpp"
#include "ragdot/plan.hpp"
#include "ragdot/status.hpp"
#include "ragdot/tensor.hpp"
#include "ragdot/version.hpp"
#include "ragdot/workloads.hpp"
