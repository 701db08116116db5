// Device activity in torch.profiler: a Kineto activity profiler for the PrivateUse1 device (tpu).
//
// torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) runs in the
// KINETO_PRIVATEUSE1 state, in which PyTorch hands Kineto the IActivityProfiler a backend registered with
// REGISTER_PRIVATEUSE1_PROFILER (torch/csrc/profiler/standalone/privateuse1_profiler.h). Ours starts the runtime's
// launch trace (runtime.h) when the profiler starts and, when it stops, turns every launched program into
//  - a device activity (Kineto CONCURRENT_KERNEL, on the device's row "tpu:N") spanning the time the device spent
//    on it: from its launch, or the end of the previous program on that device if later, to its completion event,
//    named after what it came from ("eager: aten::mul.Tensor", "fused: 12 ops", "compiled: <graph>") and linked to
//    the host op that launched it (its device time counts in that op's device time in key_averages()), and
//  - a host activity (PRIVATEUSE1_RUNTIME, "PJRT_LoadedExecutable_Execute") on the launching thread, with a flow
//    arrow to the device activity in the Chrome trace.
// Nothing is measured while no profiler runs. Built when torch ships Kineto's headers and the registry (torch 2.11
// and later); otherwise kinetoPluginBuilt() is false and torch.profiler shows host activity only.
#pragma once

namespace torch_tpu {

bool kinetoPluginBuilt();

}  // namespace torch_tpu
