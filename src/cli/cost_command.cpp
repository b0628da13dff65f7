// cost: price per million tokens, per job and the own-vs-rent break-even, from a throughput
// (given, or read from a bench.json) and a cloud and an owned price model.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cost/cost_format.h"
#include "cost/cost_request.h"
#include "cost/worked_example.h"

namespace tokenmill::cli {

namespace {

struct CostFlags {
  CostRequest request;
  bool example = false;
  bool json = false;
};

}  // namespace

void add_cost_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "cost", "Cost per million tokens and per job, owned vs rented, and the break-even between them");
  auto f = std::make_shared<CostFlags>();
  CostRequest& r = f->request;
  cmd->add_option("--preset", r.preset, "GPU preset: rtx4090, a100-80gb, h100-sxm, h200 (editable defaults)");
  cmd->add_option("--gpus", r.gpus, "GPUs in the machine (default 1)");
  cmd->add_option("--gpu-hour-price", r.gpu_hour_price, "Cloud price per GPU-hour");
  cmd->add_option("--purchase-price", r.purchase_price, "Purchase price of the whole machine");
  cmd->add_option("--power-watts", r.power_watts, "Power the whole machine draws while working, in watts");
  cmd->add_option("--kwh-price", r.kwh_price, "Electricity price per kWh");
  cmd->add_option("--years", r.years, "Amortisation period in years (default 3)");
  cmd->add_option(
      "--utilisation", r.utilisation,
      "Fraction of the amortisation period doing useful work, (0, 1] (default hours-per-day / 24)");
  cmd->add_option("--other-per-year", r.other_per_year,
                  "Other yearly costs of owning: space, cooling, support");
  cmd->add_option("--hours-per-day", r.hours_per_day,
                  "Hours of use per day, for the break-even (default 24)");
  cmd->add_option("--currency", r.currency, "Currency label, never converted (default $)");
  auto* tps = cmd->add_option("--tokens-per-s", r.tokens_per_s, "Throughput of the whole machine, tokens/s");
  cmd->add_option("--bench", r.bench_path,
                  "A bench.json: train (training) and largest-batch decode (inference)")
      ->excludes(tps);
  cmd->add_option("--phase", r.phase, "The bench phase to price, or the label of --tokens-per-s")
      ->check(CLI::IsMember({"train", "prefill", "decode"}));
  cmd->add_option("--job-hours", r.job_hours, "Price a job of this many hours");
  cmd->add_option("--job-tokens", r.job_tokens, "Price a job of this many tokens (at the first throughput)");
  cmd->add_flag("--example", f->example,
                "The worked example: a month of fine-tuning (180 h, 700 W, 0.6 per kWh, 3 years, H100 SXM); "
                "other flags change it");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->callback([f] {
    const CostRequest request = f->example ? with_defaults(f->request, worked_example_request()) : f->request;
    const CostReport report = compute_cost(resolve_cost_request(request));
    fmt::print("{}", f->json ? to_json(report).dump(2) + "\n" : to_text(report));
  });
}

}  // namespace tokenmill::cli
