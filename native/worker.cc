// The NVML worker thread (see worker.h for the lifecycle).
#include "worker.h"

namespace gpugate {

Worker::Worker(Task onExit) : state_(std::make_shared<State>()) {
  thread_ = std::thread(&Worker::Run, state_, std::move(onExit));
}

Worker::~Worker() {
  Stop();
  if (thread_.joinable()) thread_.detach();
}

void Worker::Run(std::shared_ptr<State> state, Task onExit) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->running = false;
      state->wake.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) break;  // stopping and drained
      task = std::move(state->queue.front());
      state->queue.pop_front();
      state->running = true;
    }
    task();
  }
  if (onExit) onExit();
}

bool Worker::Post(Task task) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->stopping) return false;
    state_->queue.push_back(std::move(task));
  }
  state_->wake.notify_one();
  return true;
}

void Worker::Stop() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_one();
}

void Worker::Join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void Worker::Detach() {
  if (thread_.joinable()) thread_.detach();
}

bool Worker::Busy() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->running || !state_->queue.empty();
}

}  // namespace gpugate
