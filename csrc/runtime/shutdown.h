// Process exit for the runtime layer (no torch).
//
// The process-wide Client is never destroyed (objects referring to it may outlive everything), but at exit the
// runtime closes: shutdown() refuses new compiles and waits for the running ones (whichever thread runs them),
// waits for every execution launched on every device (their errors are dropped), destroys the buffers whose
// destruction was deferred, stops that thread, and from then on no PJRT call is made: a Buffer, Executable or
// Event destroyed later (a static destructor, while the plugin's own static destructors run too) leaves its PJRT
// object to the OS, and any other use throws an Error with kClosedMessage. The client's threads stay idle.
// Call it once the work of the layers above has stopped (their background compiles, cache writes). Idempotent and
// thread-safe; Client::init registers it as an exit handler, and the Python extension calls it once the
// interpreter has finalized, before exit() runs any static destructor.
#pragma once

namespace torch_tpu {
namespace runtime {

// What every use of the runtime raises once it was shut down.
constexpr const char* kClosedMessage = "the tpu runtime has been shut down (the process is exiting)";

void shutdown();
bool isShutDown();

}  // namespace runtime
}  // namespace torch_tpu
