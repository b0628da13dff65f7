// Replays tests/fixtures/chat_templates/*.json: what Python jinja2, configured as transformers
// configures it, renders for the real Hugging Face templates and for the Jinja feature
// snippets. Every expected string must match byte for byte, and every case where Python
// raises must raise here too (with the same message for raise_exception()).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace tokenmill {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using ::testing::HasSubstr;

const fs::path kFixtureDir = fs::path(TOKENMILL_FIXTURES_DIR) / "chat_templates";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string test_name(const std::string& raw) {
  std::string name;
  for (char c : raw) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

struct Case {
  std::string name;
  std::string source;  // the template
  ordered_json json;   // messages, kwargs, expected | error | error_type
  bool real_template = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<fs::path> template_fixture_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kFixtureDir)) {
    if (entry.path().extension() == ".json" && entry.path().stem() != "jinja_features")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Case> template_cases() {
  std::vector<Case> cases;
  for (const fs::path& file : template_fixture_files()) {
    const ordered_json fixture = ordered_json::parse(read_file(file));
    const std::string source = read_file(kFixtureDir / "templates" / fixture["template"].get<std::string>());
    for (const ordered_json& c : fixture["cases"]) {
      cases.push_back(
          {test_name(file.stem().string() + "_" + c["name"].get<std::string>()), source, c, true});
    }
  }
  return cases;
}

std::vector<Case> feature_cases() {
  std::vector<Case> cases;
  const ordered_json fixture = ordered_json::parse(read_file(kFixtureDir / "jinja_features.json"));
  for (const ordered_json& c : fixture["cases"]) {
    cases.push_back({test_name(c["name"].get<std::string>()), c["template"].get<std::string>(), c});
  }
  return cases;
}

// make_expected.py's fixed clock: 2024-07-26 09:05:03.
std::tm fixed_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  tm.tm_hour = 9;
  tm.tm_min = 5;
  tm.tm_sec = 3;
  return tm;
}

// Splits transformers-style kwargs into the options and the extra kwargs.
ChatTemplateOptions options_for(const ordered_json& kwargs, ordered_json& extra) {
  ChatTemplateOptions options;
  options.now = fixed_now();
  options.add_generation_prompt = false;  // apply_chat_template's default
  extra = ordered_json::object();
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "add_generation_prompt") {
      options.add_generation_prompt = value.get<bool>();
    } else if (key == "bos_token") {
      options.bos_token = value.get<std::string>();
    } else if (key == "eos_token") {
      options.eos_token = value.get<std::string>();
    } else {
      extra[key] = value;
    }
  }
  return options;
}

ordered_json messages_of(const ordered_json& c) {
  if (c.contains("messages")) return c["messages"];
  return ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
}

std::string render_case(const Case& c) {
  const ChatTemplate tpl(c.source);
  ordered_json extra;
  const ChatTemplateOptions options = options_for(c.json["kwargs"], extra);
  return tpl.render_ordered(messages_of(c.json), extra, options);
}

// Messages with only string role/content and no extra kwargs can go through every entry point.
bool plain_conversation(const ordered_json& c) {
  for (const auto& [key, value] : c["kwargs"].items()) {
    if (key != "add_generation_prompt" && key != "bos_token" && key != "eos_token") return false;
  }
  for (const ordered_json& m : messages_of(c)) {
    if (m.size() != 2 || !m.contains("role") || !m.contains("content") || !m["content"].is_string())
      return false;
  }
  return true;
}

class ChatTemplateFixture : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateFixture, MatchesPythonJinja) {
  const Case& c = GetParam();
  if (c.json.contains("expected")) {
    const std::string expected = c.json["expected"].get<std::string>();
    EXPECT_EQ(render_case(c), expected);
    if (plain_conversation(c.json)) {
      const ChatTemplate tpl(c.source);
      ordered_json extra;
      const ChatTemplateOptions options = options_for(c.json["kwargs"], extra);
      std::vector<ChatMessage> messages;
      for (const ordered_json& m : messages_of(c.json)) messages.push_back({m["role"], m["content"]});
      EXPECT_EQ(tpl.render(messages, options), expected) << "render()";
      // nlohmann::json sorts keys (content before role); the real templates never show that.
      if (c.real_template) {
        EXPECT_EQ(tpl.render_json(nlohmann::json::parse(messages_of(c.json).dump()), options), expected)
            << "render_json()";
      }
    }
    return;
  }
  try {
    const std::string rendered = render_case(c);
    ADD_FAILURE() << "Python raises " << c.json.dump() << " but we rendered:\n" << rendered;
  } catch (const Error& e) {
    if (c.json.contains("error")) {
      // raise_exception(): the template's own message, reported as such.
      EXPECT_THAT(e.what(), HasSubstr(c.json["error"].get<std::string>()));
      EXPECT_THAT(e.what(), HasSubstr("raised an exception at"));
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateFixture, ::testing::ValuesIn(template_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(JinjaFeatures, ChatTemplateFixture, ::testing::ValuesIn(feature_cases()), case_name);

TEST(ChatTemplateFixtures, EveryTemplateHasCases) {
  const std::vector<fs::path> files = template_fixture_files();
  EXPECT_EQ(files.size(), 9u);
  for (const fs::path& file : files) {
    const ordered_json fixture = ordered_json::parse(read_file(file));
    EXPECT_GE(fixture["cases"].size(), 18u) << file;
    EXPECT_TRUE(fs::exists(kFixtureDir / "templates" / fixture["template"].get<std::string>())) << file;
  }
  EXPECT_GE(feature_cases().size(), 100u);
}

}  // namespace
}  // namespace tokenmill
