// What `tokenmill bench` measures: a model loaded from a file, or a synthetic model of a
// standard shape (model/shape_presets.h) with seeded random weights.
//
// A synthetic model is built as the training master copy (train/parameters.h: f32 values,
// gradients and AdamW moments, 16 bytes per parameter), initialised as for training from
// scratch (ParameterSet::init_gpt2: N(0, 0.02) matrices and embeddings, residual projections
// scaled by 1/sqrt(2 layers), norm weights 1, biases 0), so activations stay finite through
// every layer. Its inference weights are views of those values for --dtype f32, or copies of
// the matrices rounded to bf16/f16 (norm weights and biases stay f32, as in a loaded model).
// The train phase then steps the same master copy.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "measure/bench_runner.h"
#include "measure/memory_budget.h"
#include "model/model.h"
#include "model/shape_presets.h"
#include "train/parameters.h"

namespace tokenmill {

struct BenchModel {
  std::unique_ptr<ParameterSet> params;  // the f32 master copy: a synthetic model's, or made for training
  std::unique_ptr<Model> model;          // the inference weights
  ModelSummary summary;
};

// Loads a model directory or GGUF file (Model::load); no master copy.
BenchModel load_bench_model(const std::filesystem::path& path);

// A synthetic model of `preset` with inference weights of `dtype` (f32, bf16 or f16), seeded.
// Reserves its bytes in `budget` before allocating; Error when they do not fit.
BenchModel synthetic_bench_model(const ShapePreset& preset, DType dtype, uint64_t seed, MemoryBudget& budget);

// `tokenmill bench --shape list`: one line per preset (name, architecture, layers, hidden,
// heads / kv heads, MLP width, vocabulary, parameters counted and published), then the sources.
std::string shape_list();

// Bytes synthetic_bench_model allocates: the master copy, plus the rounded matrices unless f32.
uint64_t synthetic_model_bytes(const ModelConfig& config, DType dtype);

}  // namespace tokenmill
