#include "measure/bench_report.h"

#include <cmath>
#include <ctime>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "measure/bench_charts.h"
#include "measure/flops.h"

namespace tokenmill {

namespace {

nlohmann::json compare_json(const BenchRun& run, const Comparison& compare) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PeerPhase& peer : compare.phases) {
    const std::optional<double> ratio = throughput_ratio(run, peer);
    phases.push_back(
        {{"phase", peer.phase},
         {"batch", peer.batch},
         {"tokens_per_s", peer.tokens_per_s},
         {"ours_tokens_per_s", ratio ? nlohmann::json(*ratio * peer.tokens_per_s) : nlohmann::json()},
         {"ratio", ratio ? nlohmann::json(*ratio) : nlohmann::json()}});
  }
  return {{"command", compare.command}, {"phases", phases}};
}

std::string percent(double fraction) { return fmt::format("{:.1f} %", 100.0 * fraction); }

// What the figures of `run` need explained: fractions above 100 %.
std::vector<std::string> reading_notes(const BenchRun& run) {
  std::vector<std::string> notes;
  for (const PhaseMeasurement& p : run.phases) {
    const PhaseMetrics m = phase_metrics(p, run.ceilings);
    if (m.bound == "memory" && m.roofline_fraction > 1)
      notes.push_back(fmt::format(
          "{} reads faster than the measured memory bandwidth: its {}B per token (weights + KV cache) are "
          "served from the {} caches, which the {} MiB calibration {} is too large for.",
          p.phase, si(m.bytes_per_token), run.ceilings.device_copy ? "device's" : "CPU",
          run.ceilings.read_bytes >> 20, run.ceilings.device_copy ? "copy" : "read"));
    if (m.mfu > 1)
      notes.push_back(fmt::format(
          "{} runs above the measured {} GEMM peak (MFU {}): its kernels outran the calibration GEMM "
          "(integer dot "
          "products of quantized weights, data resident in cache), or the calibration was disturbed by other "
          "processes; rerun on a quiet machine, with a longer --calibration-seconds.",
          p.phase, dtype_name(run.ceilings.gemm_weights), percent(m.mfu)));
  }
  return notes;
}

nlohmann::json gpu_json(const std::optional<GpuSampleSummary>& gpu) {
  if (!gpu) return nullptr;
  return {{"samples", gpu->samples},
          {"mean_gpu_utilization", gpu->mean_gpu_utilization},
          {"max_gpu_utilization", gpu->max_gpu_utilization},
          {"mean_memory_utilization", gpu->mean_memory_utilization},
          {"max_memory_utilization", gpu->max_memory_utilization},
          {"mean_power_watts", gpu->mean_power_watts},
          {"max_power_watts", gpu->max_power_watts},
          {"energy_joules", gpu->energy_joules},
          {"joules_per_token", gpu->joules_per_token},
          {"max_memory_used_bytes", gpu->max_memory_used_bytes},
          {"mean_sm_clock_mhz", gpu->mean_sm_clock_mhz}};
}

bool any_gpu_samples(const BenchRun& run) {
  for (const PhaseMeasurement& p : run.phases)
    if (p.gpu) return true;
  return false;
}

// The markdown cells of a phase's GPU readings: utilisation and memory-controller
// utilisation (mean / max, %), power (mean / max, W), joules per token; "-" without samples.
std::string gpu_cells(const std::optional<GpuSampleSummary>& gpu) {
  if (!gpu) return " - | - | - | - |";
  return fmt::format(" {:.0f} / {:.0f} | {:.0f} / {:.0f} | {:.0f} / {:.0f} | {:.3g} |",
                     gpu->mean_gpu_utilization, gpu->max_gpu_utilization, gpu->mean_memory_utilization,
                     gpu->max_memory_utilization, gpu->mean_power_watts, gpu->max_power_watts,
                     gpu->joules_per_token);
}

std::string ceilings_line(const Ceilings& c) {
  return fmt::format("{}FLOP/s ({} {}^3 GEMM), {} {}B/s ({} MiB), ridge {:.2f} FLOP/byte", si(c.peak_flops),
                     dtype_name(c.gemm_weights), c.gemm_size, c.device_copy ? "copy" : "read",
                     si(c.read_bandwidth), c.read_bytes >> 20, ridge_point(c));
}

std::string model_line(const ModelSummary& m) {
  return fmt::format("{} ({}), {} parameters, {}B of {}weights ({})", m.name, m.architecture,
                     si(static_cast<double>(m.parameters)), si(static_cast<double>(m.weight_bytes)),
                     m.synthetic ? "seeded random " : "", m.weight_dtype);
}

std::string device_line(const DeviceSummary& d) {
  if (d.isa.empty()) return fmt::format("{} ({})", d.name, d.backend);
  return fmt::format("{} ({}, {}, {} threads)", d.name, d.backend, d.isa, d.threads);
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out)
    fail("bench: cannot write '{}' (check that the directory is writable and the disk not full)",
         path.string());
}

}  // namespace

std::string si(double value) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P"};
  size_t prefix = 0;
  double v = value;
  while (std::fabs(v) >= 999.5 && prefix + 1 < std::size(kPrefixes)) {
    v /= 1000.0;
    ++prefix;
  }
  const int decimals = std::fabs(v) >= 99.95 ? 0 : std::fabs(v) >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f} {}", v, decimals, kPrefixes[prefix]);
}

PhaseMetrics phase_metrics(const PhaseMeasurement& phase, const Ceilings& ceilings) {
  PhaseMetrics m;
  const auto tokens = static_cast<double>(phase.tokens);
  m.tokens_per_s = phase.tokens_per_s();
  m.flops_per_token = phase.flops / tokens;
  m.achieved_flops = phase.flops / phase.seconds;
  m.mfu = mfu(m.achieved_flops, ceilings.peak_flops);
  m.bytes_per_token = phase.bytes / tokens;
  m.achieved_bandwidth = phase.bytes / phase.seconds;
  m.intensity = arithmetic_intensity(phase.flops, phase.bytes);
  m.roofline_fraction = roofline_fraction(ceilings, m.intensity, m.achieved_flops);
  m.bound = bound(ceilings, m.intensity);
  return m;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

nlohmann::json bench_json(const BenchRun& run, const std::optional<Comparison>& compare,
                          const std::string& created_utc) {
  nlohmann::json phases = nlohmann::json::array();
  for (const PhaseMeasurement& p : run.phases) {
    const PhaseMetrics m = phase_metrics(p, run.ceilings);
    phases.push_back({{"phase", p.phase},
                      {"batch", p.batch},
                      {"tokens", p.tokens},
                      {"seconds", p.seconds},
                      {"tokens_per_s", m.tokens_per_s},
                      {"flops_per_token", m.flops_per_token},
                      {"achieved_flops", m.achieved_flops},
                      {"mfu", m.mfu},
                      {"bytes_per_token", m.bytes_per_token},
                      {"achieved_bandwidth", m.achieved_bandwidth},
                      {"arithmetic_intensity", m.intensity},
                      {"roofline_fraction", m.roofline_fraction},
                      {"bound", m.bound},
                      {"gpu_samples", gpu_json(p.gpu)}});
  }
  const Ceilings& c = run.ceilings;
  nlohmann::json json = {
      {"schema", kBenchSchema},
      {"created_utc", created_utc},
      {"tokenmill_version", TOKENMILL_VERSION},
      {"device",
       {{"backend", run.device.backend},
        {"name", run.device.name},
        {"threads", run.device.threads},
        {"isa", run.device.isa.empty() ? nlohmann::json() : nlohmann::json(run.device.isa)}}},
      {"roofline",
       {{"peak_flops", c.peak_flops},
        {"read_bandwidth", c.read_bandwidth},
        {"gemm", fmt::format("{0} {1}x{1}x{1}", dtype_name(c.gemm_weights), c.gemm_size)},
        {"copy_bytes", c.read_bytes},
        {"bandwidth_probe", c.device_copy ? "device copy" : "host read"}}},
      {"model",
       {{"name", run.model.name},
        {"architecture", run.model.architecture},
        {"parameters", run.model.parameters},
        {"weight_bytes", run.model.weight_bytes},
        {"weight_dtype", run.model.weight_dtype},
        {"synthetic", run.model.synthetic}}},
      {"phases", phases},
      {"peak_memory_bytes",
       run.peak_memory_bytes ? nlohmann::json(*run.peak_memory_bytes) : nlohmann::json()},
      {"gpu_sampling", run.gpu_sampling},
      {"notes", run.notes}};
  if (compare) json["compare"] = compare_json(run, *compare);
  return json;
}

std::string bench_markdown(const BenchRun& run, const std::optional<Comparison>& compare) {
  std::string md = fmt::format("# tokenmill bench: {}\n\n", run.model.name);
  md += fmt::format("- model: {}\n- device: {}\n- ceilings: {}\n", model_line(run.model),
                    device_line(run.device), ceilings_line(run.ceilings));
  if (run.peak_memory_bytes)
    md += fmt::format("- peak memory: {}B\n", si(static_cast<double>(*run.peak_memory_bytes)));
  md += fmt::format("- GPU readings: {}\n", run.gpu_sampling);
  const bool gpu = any_gpu_samples(run);
  md +=
      "\n| phase | batch | tokens | seconds | tokens/s | FLOP/token | achieved FLOP/s | MFU | bytes/token | "
      "achieved bytes/s | FLOP/byte | bound | roofline |";
  md += gpu ? " GPU util % | memory util % | power W | J/token |\n" : "\n";
  md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|";
  md += gpu ? "---:|---:|---:|---:|\n" : "\n";
  for (const PhaseMeasurement& p : run.phases) {
    const PhaseMetrics m = phase_metrics(p, run.ceilings);
    md += fmt::format("| {} | {} | {} | {:.3f} | {:.1f} | {} | {} | {} | {}B | {}B/s | {:.2f} | {} | {} |",
                      p.phase, p.batch, p.tokens, p.seconds, m.tokens_per_s, si(m.flops_per_token),
                      si(m.achieved_flops), percent(m.mfu), si(m.bytes_per_token), si(m.achieved_bandwidth),
                      m.intensity, m.bound, percent(m.roofline_fraction));
    md += gpu ? gpu_cells(p.gpu) + "\n" : "\n";
  }
  if (compare) {
    md += fmt::format(
        "\n## Compared with `{}`\n\n| phase | batch | peer tokens/s | ours / peer |\n|---|---:|---:|---:|\n",
        compare->command);
    for (const PeerPhase& peer : compare->phases) {
      const std::optional<double> ratio = throughput_ratio(run, peer);
      md += fmt::format("| {} | {} | {:.1f} | {} |\n", peer.phase, peer.batch, peer.tokens_per_s,
                        ratio ? fmt::format("{:.2f}x", *ratio) : std::string("(no such phase here)"));
    }
  }
  md += "\n## Notes\n\n";
  for (const std::string& note : run.notes) md += fmt::format("- {}\n", note);
  for (const std::string& note : reading_notes(run)) md += fmt::format("- {}\n", note);
  md +=
      "- FLOPs: weight matmuls (lm_head for the tokens whose logits are computed) and causal attention; "
      "bytes: the minimum a forward must read (weights once per chunk or decode step, the KV cache it "
      "attends; of a mixture of experts' experts, those its tokens were routed to, counted from the routing; "
      "FLOPs count each token's experts).\n";
  md +=
      "- decode at batch b: b sequences decoded together by the serving engine's PagedTransformer, one step "
      "per token for all of them; tokens/s counts every sequence's tokens.\n";
  md +=
      "- train: one step of forward, backward and AdamW on the f32 master copy (mean of the timed steps), "
      "bf16 runs multiplying a bf16 copy of the matrices; FLOPs 3 x forward with every token's logits; "
      "bytes: the f32 weights read twice, the gradients and AdamW's state (activations, and a bf16 run's "
      "copy and its refresh, not counted).\n";
  md += "\n![throughput vs batch size](throughput.svg)\n\n![roofline](roofline.svg)\n";
  return md;
}

std::string bench_table(const BenchRun& run, const std::optional<Comparison>& compare) {
  std::string out = fmt::format("model     {}\ndevice    {}\nceilings  {}\n\n", model_line(run.model),
                                device_line(run.device), ceilings_line(run.ceilings));
  out += fmt::format("{:<8} {:>5} {:>6} {:>10} {:>8} {:>12} {:>9}  {}\n", "phase", "batch", "tokens",
                     "tokens/s", "MFU", "bandwidth", "roofline", "bound");
  for (const PhaseMeasurement& p : run.phases) {
    const PhaseMetrics m = phase_metrics(p, run.ceilings);
    out += fmt::format("{:<8} {:>5} {:>6} {:>10.1f} {:>8} {:>12} {:>9}  {}\n", p.phase, p.batch, p.tokens,
                       m.tokens_per_s, percent(m.mfu), si(m.achieved_bandwidth) + "B/s",
                       percent(m.roofline_fraction), m.bound);
  }
  if (compare)
    for (const PeerPhase& peer : compare->phases) {
      const std::optional<double> ratio = throughput_ratio(run, peer);
      out += fmt::format("vs peer   {} batch {}: {}\n", peer.phase, peer.batch,
                         ratio ? fmt::format("{:.2f}x", *ratio) : std::string("no such phase here"));
    }
  if (run.peak_memory_bytes)
    out += fmt::format("peak memory {}B\n", si(static_cast<double>(*run.peak_memory_bytes)));
  out += fmt::format("gpu readings {}\n", run.gpu_sampling);
  for (const PhaseMeasurement& p : run.phases)
    if (p.gpu)
      out += fmt::format(
          "  {} batch {}: GPU {:.0f} % (max {:.0f}), memory {:.0f} %, {:.0f} W (max {:.0f}), {:.3g} "
          "J/token\n",
          p.phase, p.batch, p.gpu->mean_gpu_utilization, p.gpu->max_gpu_utilization,
          p.gpu->mean_memory_utilization, p.gpu->mean_power_watts, p.gpu->max_power_watts,
          p.gpu->joules_per_token);
  for (const std::string& note : run.notes) out += fmt::format("note: {}\n", note);
  for (const std::string& note : reading_notes(run)) out += fmt::format("note: {}\n", note);
  return out;
}

void write_bench_report(const std::filesystem::path& dir, const nlohmann::json& json, const BenchRun& run,
                        const std::optional<Comparison>& compare) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("bench: cannot create the output directory '{}': {}", dir.string(), ec.message());
  write_file(dir / "bench.json", json.dump(2) + "\n");
  write_file(dir / "bench.md", bench_markdown(run, compare));
  write_file(dir / "throughput.svg", throughput_svg(run));
  write_file(dir / "roofline.svg", roofline_svg(run));
}

}  // namespace tokenmill
