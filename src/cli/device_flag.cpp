#include "cli/device_flag.h"

#include <fmt/format.h>

#include "runtime/device_choice.h"

namespace tokenmill::cli {

void add_device_flag(CLI::App& command, std::string& device) {
  command
      .add_option("--device", device,
                  "auto (a GPU when one can run the model, else the CPU), cpu, cuda or cuda:N")
      ->capture_default_str();
}

void add_no_mmap_flag(CLI::App& command, HostWeights& host_weights) {
  command.add_flag_callback(
      "--no-mmap", [&host_weights] { host_weights = HostWeights::Copied; },
      "On the CPU, copy the weights into memory on 2 MiB pages instead of reading the mapped model file in "
      "place: faster decode where the page cache holds the file in 4 KiB pages (a file just downloaded or "
      "written), for the model's size in memory and one copy at load");
}

std::unique_ptr<Backend> open_device(const std::string& device, Model& model, HostWeights host_weights) {
  DeviceChoice choice = choose_device(device, model, host_weights);
  if (!choice.note.empty()) fmt::print(stderr, "note: {}\n", choice.note);
  return std::move(choice.backend);
}

}  // namespace tokenmill::cli
