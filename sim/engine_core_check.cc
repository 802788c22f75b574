// Part of zplan::sim_engine, to hold its headers to what sim/README.md says of them: the engine's
// core (the step graph, the event queue, the engine and its periodic skipping) needs neither
// nlohmann/json nor the ds_config, so that it can be read, tested and reused without them. A
// header of the core that comes to include either fails the build here.
#include "sim/engine.h"
#include "sim/event_queue.h"
#include "sim/fingerprint.h"
#include "sim/memory_breakdown.h"
#include "sim/periodic.h"
#include "sim/step_graph.h"
#include "sim/time.h"

#if defined(INCLUDE_NLOHMANN_JSON_HPP_) || defined(NLOHMANN_JSON_VERSION_MAJOR)
#error "a header of the engine's core includes nlohmann/json (see sim/README.md)"
#endif
#if defined(ZPLAN_SIM_ZERO_CONFIG_H_)
#error "a header of the engine's core includes the ds_config (see sim/README.md)"
#endif
#if defined(ZPLAN_HARDWARE_PROFILE_H_) || defined(ZPLAN_MODELS_MODEL_H_)
#error "a header of the engine's core includes the hardware profiles or the models (sim/README.md)"
#endif
