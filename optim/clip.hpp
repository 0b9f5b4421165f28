// Gradient clipping, in place on the parameters' .grad(); parameters without a gradient are
// skipped. Both are deterministic: the norm is summed in double over fixed-size blocks whose
// partial sums are added in order, so it is bit-identical at any thread count.
#pragma once
#include <vector>

#include "optim/optimizers.hpp"

namespace qkv::optim {

// The global L2 norm of all gradients together, sqrt(sum over params of sum g^2), returned
// as it was before clipping (for the logs). When it exceeds max_norm every gradient is
// scaled by max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_. A non-finite norm
// leaves the gradients as they are (the caller sees it and can skip the step).
double clip_grad_norm(const std::vector<Var>& params, double max_norm);
double clip_grad_norm(const NamedParams& params, double max_norm);

// The global L2 norm of the gradients, without clipping.
double grad_norm(const std::vector<Var>& params);
double grad_norm(const NamedParams& params);

// Clamps every gradient element to [-clip_value, clip_value] (NaN stays NaN), as
// torch.nn.utils.clip_grad_value_.
void clip_grad_value(const std::vector<Var>& params, double clip_value);
void clip_grad_value(const NamedParams& params, double clip_value);

// Multiplies every gradient by factor (gradient accumulation's 1 / total weight).
void scale_grads(const std::vector<Var>& params, double factor);

}  // namespace qkv::optim
