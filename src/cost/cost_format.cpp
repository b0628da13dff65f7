#include "cost/cost_format.h"

#include <iterator>

#include <fmt/format.h>

namespace tokenmill {

namespace {

constexpr const char* kDefaultsWarning = "editable defaults, not quotes: each flag overrides its field";

// One table row: label, owned and cloud figures ("-" when absent), and how it was computed.
void row(std::string& out, std::string_view label, std::optional<double> owned, std::optional<double> cloud,
         const char* number_format, std::string_view how = "") {
  const auto cell = [&](std::optional<double> v) {
    return v ? fmt::format(fmt::runtime(number_format), *v) : std::string("-");
  };
  fmt::format_to(std::back_inserter(out), "{:<28}{:>12}{:>12}{}{}\n", label, cell(owned), cell(cloud),
                 how.empty() ? "" : "  ", how);
}

void preset_lines(std::string& out, const GpuPreset& p) {
  fmt::format_to(std::back_inserter(out), "prices: preset {} in US dollars: {}\n", p.name, kDefaultsWarning);
  const auto line = [&](std::string_view what, std::string value, std::string_view flag,
                        std::string_view source) {
    fmt::format_to(std::back_inserter(out), "  {:<15}{:<17}{:<18}{}\n", what, value, flag, source);
  };
  line("purchase price", fmt::format("{:g} per GPU", p.purchase_price.value), "--purchase-price",
       p.purchase_price.source);
  line("cloud price", fmt::format("{:g} per GPU-h", p.cloud_price_per_gpu_hour.value), "--gpu-hour-price",
       p.cloud_price_per_gpu_hour.source);
  line("board power", fmt::format("{:g} W per GPU", p.board_power_watts.value), "--power-watts",
       p.board_power_watts.source);
  if (p.machine_power_watts)
    line("machine power", fmt::format("{:g} W per GPU", p.machine_power_watts->value), "(not the default)",
         p.machine_power_watts->source);
}

void owned_and_cloud_lines(std::string& out, const CostReport& r) {
  const auto& owned = r.inputs.owned;
  const auto& cloud = r.inputs.cloud;
  if (owned)
    fmt::format_to(
        std::back_inserter(out),
        "owned: purchase {:g}, {:g} years, {:g} W, {:g} per kWh, utilisation {:g}, other {:g} per year\n",
        owned->purchase_price, owned->amortisation_years, owned->power_watts, owned->kwh_price,
        owned->utilisation, owned->other_per_year);
  if (cloud)
    fmt::format_to(std::back_inserter(out), "cloud: {:g} per GPU-hour x {} GPU{}\n",
                   cloud->price_per_gpu_hour, cloud->gpus, cloud->gpus > 1 ? "s" : "");
  fmt::format_to(std::back_inserter(out), "\n{:<28}{:>12}{:>12}  how\n", r.inputs.currency, "owned", "cloud");
  const std::optional<double> no_figure;
  const auto owned_part = [&](double OwnedHourly::*part) {
    return r.owned_hourly ? std::optional((*r.owned_hourly).*part) : no_figure;
  };
  row(out, "per useful hour", r.owned_hourly ? std::optional(r.owned_hourly->total()) : no_figure,
      r.cloud_hourly, "{:.4f}");
  if (owned) {
    row(out, "  amortisation", owned_part(&OwnedHourly::amortisation), no_figure, "{:.4f}",
        fmt::format("{:g} / ({:g} y x 8760 h x {:g})", owned->purchase_price, owned->amortisation_years,
                    owned->utilisation));
    row(out, "  energy", owned_part(&OwnedHourly::energy), no_figure, "{:.4f}",
        fmt::format("{:g} kW x {:g} per kWh", owned->power_watts / 1000.0, owned->kwh_price));
    if (owned->other_per_year > 0)
      row(out, "  other", owned_part(&OwnedHourly::other), no_figure, "{:.4f}",
          fmt::format("{:g} / (8760 h x {:g})", owned->other_per_year, owned->utilisation));
  }
  if (cloud)
    row(out, "  rent", no_figure, r.cloud_hourly, "{:.4f}",
        fmt::format("{:g} x {} GPU", cloud->price_per_gpu_hour, cloud->gpus));
}

void phase_lines(std::string& out, const CostReport& r) {
  if (r.phases.empty()) return;
  out += "per million tokens\n";
  for (const PhaseCost& p : r.phases) {
    const Throughput& t = p.throughput;
    const std::string label = t.batch > 0
                                  ? fmt::format("  {} b{} {:.4g} tok/s", t.phase, t.batch, t.tokens_per_s)
                                  : fmt::format("  {} {:.4g} tok/s", t.phase, t.tokens_per_s);
    row(out, label, p.owned_per_million, p.cloud_per_million, "{:.4f}",
        fmt::format("hourly / ({:g} tok/s x 3600 s) x 1e6", t.tokens_per_s));
  }
}

void job_lines(std::string& out, const CostReport& r) {
  if (!r.job) return;
  const JobCost& job = *r.job;
  const std::optional<double> no_figure;
  const std::string label = job.tokens ? fmt::format("job: {:g} tokens = {:.4g} h", *job.tokens, job.hours)
                                       : fmt::format("job: {:g} h", job.hours);
  row(out, label, job.owned ? std::optional(job.owned->total()) : no_figure, job.cloud, "{:.2f}",
      job.tokens ? fmt::format("{:g} / ({:g} tok/s x 3600 s)", *job.tokens,
                               r.inputs.throughputs.front().tokens_per_s)
                 : "");
  if (const auto& owned = r.inputs.owned) {
    row(out, "  amortisation", job.owned->amortisation, no_figure, "{:.2f}",
        fmt::format("{:.4g} h x {:.4f}", job.hours, r.owned_hourly->amortisation));
    row(out, "  energy", job.owned->energy, no_figure, "{:.2f}",
        fmt::format("{:.4g} h x {:g} kW x {:g}", job.hours, owned->power_watts / 1000.0, owned->kwh_price));
    if (owned->other_per_year > 0)
      row(out, "  other", job.owned->other, no_figure, "{:.2f}",
          fmt::format("{:.4g} h x {:.4f}", job.hours, r.owned_hourly->other));
  }
  if (r.cloud_hourly)
    row(out, "  rent", no_figure, job.cloud, "{:.2f}",
        fmt::format("{:.4g} h x {:g}", job.hours, *r.cloud_hourly));
}

void break_even_lines(std::string& out, const CostReport& r) {
  if (!r.break_even) return;
  const BreakEven& b = *r.break_even;
  const OwnedMachine& owned = *r.inputs.owned;
  const std::string other =
      owned.other_per_year > 0 ? fmt::format(" - {:g} / 12", owned.other_per_year) : std::string();
  const std::string formula = fmt::format("{:g} / (({:g} - {:g}) x {:g} h{})", owned.purchase_price,
                                          *r.cloud_hourly, r.owned_hourly->energy, b.hours_per_month, other);
  if (!b.months) {
    fmt::format_to(std::back_inserter(out),
                   "break-even: never: running the owned machine (energy{}) costs at least the rent, so its "
                   "purchase never pays back\n",
                   owned.other_per_year > 0 ? ", other costs" : "");
    return;
  }
  fmt::format_to(std::back_inserter(out),
                 "break-even: {:.2f} months at {:g} h/day ({:g} h/month), {} the {:g}-month amortisation\n",
                 *b.months, r.inputs.hours_per_day, b.hours_per_month,
                 b.within_amortisation ? "within" : "after", owned.amortisation_years * 12.0);
  fmt::format_to(std::back_inserter(out), "  = {}\n", formula);
}

nlohmann::json sourced(const SourcedValue& v) { return {{"value", v.value}, {"source", v.source}}; }

nlohmann::json preset_json(const GpuPreset* p) {
  if (p == nullptr) return nullptr;
  return {
      {"key", p->key},
      {"name", p->name},
      {"currency", "USD"},
      {"note", kDefaultsWarning},
      {"purchase_price", sourced(p->purchase_price)},
      {"board_power_watts", sourced(p->board_power_watts)},
      {"machine_power_watts", p->machine_power_watts ? sourced(*p->machine_power_watts) : nlohmann::json()},
      {"cloud_price_per_gpu_hour", sourced(p->cloud_price_per_gpu_hour)}};
}

nlohmann::json hourly_json(const OwnedHourly& h) {
  return {{"amortisation", h.amortisation}, {"energy", h.energy}, {"other", h.other}, {"total", h.total()}};
}

nlohmann::json number_or_null(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

std::string to_text(const CostReport& r) {
  std::string out;
  if (!r.inputs.title.empty()) out += r.inputs.title + "\n";
  if (r.inputs.preset != nullptr) preset_lines(out, *r.inputs.preset);
  owned_and_cloud_lines(out, r);
  phase_lines(out, r);
  job_lines(out, r);
  break_even_lines(out, r);
  for (const std::string& note : r.inputs.notes) out += "note: " + note + "\n";
  return out;
}

nlohmann::json to_json(const CostReport& r) {
  nlohmann::json out = {{"title", r.inputs.title},
                        {"currency", r.inputs.currency},
                        {"preset", preset_json(r.inputs.preset)},
                        {"hours_per_day", r.inputs.hours_per_day},
                        {"cloud", nullptr},
                        {"owned", nullptr},
                        {"phases", nlohmann::json::array()},
                        {"job", nullptr},
                        {"break_even", nullptr},
                        {"notes", r.inputs.notes}};
  if (const auto& c = r.inputs.cloud)
    out["cloud"] = {
        {"price_per_gpu_hour", c->price_per_gpu_hour}, {"gpus", c->gpus}, {"hourly", *r.cloud_hourly}};
  if (const auto& o = r.inputs.owned)
    out["owned"] = {{"purchase_price", o->purchase_price},   {"amortisation_years", o->amortisation_years},
                    {"power_watts", o->power_watts},         {"kwh_price", o->kwh_price},
                    {"utilisation", o->utilisation},         {"other_per_year", o->other_per_year},
                    {"hourly", hourly_json(*r.owned_hourly)}};
  for (const PhaseCost& p : r.phases)
    out["phases"].push_back(
        {{"phase", p.throughput.phase},
         {"batch", p.throughput.batch > 0 ? nlohmann::json(p.throughput.batch) : nlohmann::json()},
         {"tokens_per_s", p.throughput.tokens_per_s},
         {"source", p.throughput.source},
         {"cloud_per_million_tokens", number_or_null(p.cloud_per_million)},
         {"owned_per_million_tokens", number_or_null(p.owned_per_million)}});
  if (const auto& j = r.job)
    out["job"] = {{"hours", j->hours},
                  {"tokens", number_or_null(j->tokens)},
                  {"cloud", number_or_null(j->cloud)},
                  {"owned", j->owned ? hourly_json(*j->owned) : nlohmann::json()}};
  if (const auto& b = r.break_even)
    out["break_even"] = {{"hours_per_month", b->hours_per_month},
                         {"months", number_or_null(b->months)},
                         {"never", !b->months},
                         {"within_amortisation", b->within_amortisation}};
  return out;
}

}  // namespace tokenmill
