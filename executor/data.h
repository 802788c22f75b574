// The reference executor's synthetic run: the initial weights and the training rows, as pure
// functions of (seed, stream, element). Every rank, stage and offload mode therefore trains the
// same model on the same data, and a test can rebuild the run in another precision
// (tests/executor/mlp_reference.h).
#ifndef ZPLAN_EXECUTOR_DATA_H_
#define ZPLAN_EXECUTOR_DATA_H_

#include <cstdint>

namespace zplan::executor {

// A deterministic value in [-1, 1) with 24 random bits, for (stream a, element b).
float synthetic_uniform(uint64_t seed, uint64_t a, uint64_t b);

// Element i of parameter `id` (the executor's parameter order, which is the model's order) at
// initialisation: uniform in +-1/sqrt(fan in), halved for anything but a square MLP weight.
// fan in = `hidden` for the MLP stacks (`mlp`), 50 for the generic models.
float initial_weight(uint64_t seed, int id, int64_t i, bool mlp, bool square_weight,
                     int64_t hidden);

// Column c of the input and of the regression target of global row `row` (the MLP stacks).
float mlp_input(uint64_t seed, uint64_t row, int64_t c);
float mlp_target(uint64_t seed, uint64_t row, int64_t c);

}  // namespace zplan::executor

#endif  // ZPLAN_EXECUTOR_DATA_H_
