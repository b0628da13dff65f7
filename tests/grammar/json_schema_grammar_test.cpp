// JSON Schema -> GBNF (grammar/json_schema_grammar.h): the text generated for small schemas,
// errors naming the JSON pointer and keyword, and, through Grammar and GrammarMatcher, for
// one schema per supported keyword the documents accepted and the near misses refused.
#include "grammar/json_schema_grammar.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"
#include "support/grammar_sentence.h"

namespace tokenmill {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string gbnf(const std::string& schema) { return json_schema_to_gbnf(ordered_json::parse(schema)); }

// The message of the Error that converting `schema` throws ("" if none).
std::string error_of(const std::string& schema) {
  try {
    gbnf(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- the generated text ----

TEST(JsonSchemaGrammar, RequiredAndOptionalPropertiesInSchemaOrder) {
  EXPECT_EQ(gbnf(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                     "age": {"type": "integer", "minimum": 0}}, "required": ["age"],
                     "additionalProperties": false})"),
            "root ::= \"{\" ws ( root-name-kv \",\" ws root-age-kv | root-age-kv ) ws \"}\"\n"
            "root-name ::= \"\\\"\" char{0,5} \"\\\"\"\n"
            "root-name-kv ::= \"\\\"name\\\":\" ws root-name\n"
            "root-age ::= [0-9] | [1-9] [0-9]{1,15}\n"
            "root-age-kv ::= \"\\\"age\\\":\" ws root-age\n"
            "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
            "ws ::= \" \"?\n");
}

TEST(JsonSchemaGrammar, EnumsArraysAndRefs) {
  EXPECT_EQ(gbnf(R"({"enum": ["a", "b\"c", 1, null, {"k": [true]}]})"),
            R"(root ::= "\"a\"" | "\"b\\\"c\"" | "1" | "null" | "{\"k\":[true]}")"
            "\n");
  EXPECT_EQ(gbnf(R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})"),
            "root ::= \"[\" ws boolean ( \",\" ws boolean ){0,2} ws \"]\"\nboolean ::= \"true\" | \"false\"\n"
            "ws ::= \" \"?\n");
  EXPECT_EQ(gbnf(R"({"$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}},
                     "$ref": "#/$defs/list"})"),
            "root ::= list\nlist ::= \"[\" ws ( list ( \",\" ws list )* ws )? \"]\"\nws ::= \" \"?\n");
}

TEST(JsonSchemaGrammar, AnyValueAndAnyObject) {
  std::string any = gbnf("{}");
  EXPECT_EQ(any.substr(0, any.find('\n')), "root ::= value");
  EXPECT_EQ(gbnf("true"), any);
  EXPECT_EQ(gbnf(R"({"description": "anything", "$schema": "x"})"), any);
  std::string object = json_object_gbnf();
  EXPECT_EQ(object.substr(0, object.find('\n')), "root ::= object");
  EXPECT_EQ(gbnf(R"({"type": "object", "additionalProperties": true})"), object);
}

TEST(JsonSchemaGrammar, RuleNamesAreSanitizedAndUnique) {
  std::string text =
      gbnf(R"({"type": "object", "properties": {"a b": {"type": "array"}, "a_b": {"type": "array"},
                                "string": {"type": "array"}}, "required": ["a b", "a_b", "string"]})");
  for (const char* rule : {"\nroot-a-b ::= ", "\nroot-a-b-2 ::= ", "\nroot-string ::= "})
    EXPECT_NE(text.find(rule), std::string::npos) << rule << " in\n" << text;
}

TEST(JsonSchemaGrammar, ErrorsNameThePointerAndKeyword) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"properties": {"a": {"not": {}}}})", R"(#/properties/a: the keyword "not" is not supported)"},
      {R"({"type": "string", "pattern": "^(a)\\1$"})",
       "#/pattern: the escape \\1 at offset 6 is not supported"},
      {R"js({"pattern": "a(?=b)"})js", "#/pattern: a lookaround"},
      {R"({"pattern": "a", "maxLength": 3})", R"(#: "maxLength" beside "pattern" is not supported)"},
      {R"({"format": "email", "minimum": 1, "multipleOf": 2})",
       R"(#: the keyword "multipleOf" is not supported)"},
      {R"({"$ref": "#/$defs/missing"})", R"(#/$ref: "#/$defs/missing" does not name a schema)"},
      {R"({"$ref": "https://example.com/s.json"})", "is not a local reference"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "#: minItems 3 exceeds maxItems 2"},
      {R"({"type": "string", "minLength": 4, "maxLength": 1})", "#: minLength 4 exceeds maxLength 1"},
      {R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})",
       "#: no integer of at most 16 digits lies between"},
      {R"({"type": "number", "exclusiveMinimum": 3, "maximum": 3})",
       "#: no number of at most 16 digits lies between"},
      {R"({"type": "number", "minimum": 0.5})", "#/minimum: only integral bounds"},
      {R"({"type": "date"})", "#/type: unknown type date"},
      {R"({"type": "object", "properties": {}, "required": ["x"]})", R"("x" is not among the properties)"},
      {R"({"type": "string", "enum": ["a", 1]})", "#/enum: the value 1 is not of the schema's type"},
      {R"({"enum": []})", "#/enum: must be a non-empty array"},
      {R"({"allOf": [{}, {}]})", "exactly one schema"},
      {R"({"anyOf": [{}], "type": "string"})", R"("type" beside "anyOf" is not supported)"},
      {R"({"items": {"minItems": -1}})", "#/items/minItems: must be a non-negative integer"},
      {R"({"type": "string", "maxLength": 20000})", "#/maxLength: 20000 is over the supported 10000"},
      {"false", "#: the schema false accepts no value"},
  };
  std::string deep = "{}", groups = "a";
  for (int i = 0; i < 100; ++i) deep = R"({"items": )" + deep + "}", groups = "(" + groups + ")";
  cases.emplace_back(deep, "nested deeper than 64 are not supported");
  cases.emplace_back(R"({"pattern": ")" + groups + R"("})", "#/pattern: groups nested deeper than 64");
  for (const auto& [schema, message] : cases)
    EXPECT_NE(error_of(schema).find(message), std::string::npos) << schema << " gave: " << error_of(schema);
}

// ---- documents accepted and refused ----

struct Case {
  const char* name;
  const char* schema;
  std::vector<std::string> accepted;
  std::vector<std::string> refused;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> list = {
      {"object_required_optional",
       R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
           "email": {"type": "string"}}, "required": ["age"], "additionalProperties": false})",
       {R"({"age":3})", R"({ "name": "Al", "age": 30, "email": "a@b" })", R"({"age":-1,"email":"x"})",
        R"({"name":"","age":0})"},
       {R"({})", R"({"name":"Al"})", R"({"age":3,"extra":1})", R"({"age":3,"name":"Al"})", R"({"age":"3"})",
        R"({"age":3,})", R"({"age":03})", R"({"age":3}  )", R"({  "age":3})", R"({"age":3)"}},
      {"additional_properties_schema",
       R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
           "additionalProperties": {"type": "boolean"}})",
       {R"({"id":1})", R"({"id":1,"x":true,"y":false})"},
       {R"({"id":1,"x":1})", R"({"x":true,"id":1})"}},
      {"any_object",
       R"({"type": "object"})",
       {R"({})", R"({ })", R"({"a":[1,{"b":null}],"c":"d"})", R"({ "a": 1.5e3 })"},
       {R"([])", R"({"a"})", R"({a:1})", R"({"a":1,})", R"(1)"}},
      {"string_lengths_and_escapes",
       R"({"type": "string", "minLength": 2, "maxLength": 3})",
       {R"("ab")", R"("a\nb")", R"("\u00e9\"\\")", "\"h\xC3\xA9!\""},
       {R"("a")", R"("abcd")", R"(ab)", "\"a\nb\"", R"("a\x")", R"("\u12g4")"}},
      {"integer_bounds",
       R"({"type": "integer", "minimum": 0, "maximum": 120})",
       {"0", "7", "99", "100", "120"},
       {"-1", "121", "200", "007", "1.0", "1e2", "\"5\""}},
      {"integer_exclusive_negative",
       R"({"type": "integer", "exclusiveMinimum": -15, "exclusiveMaximum": 3})",
       {"-14", "-9", "0", "2"},
       {"-15", "-20", "3", "10"}},
      {"number",
       R"({"type": "number"})",
       {"0", "-0.5", "3.25", "1e10", "6.02E+23", "-1.5e-3"},
       {"01", ".5", "1.", "1e", "+1", "--1", "NaN"}},
      {"number_bounds",
       R"({"type": "number", "minimum": -2, "maximum": 10})",
       {"-2", "-1.75", "0", "9.99", "10", "10.000"},
       {"-2.5", "-3", "10.5", "11", "1e1"}},
      {"number_exclusive",
       R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
       {"0.5", "0.001", "0.999"},
       {"0", "0.0", "1", "1.0", "-0.5", "1.5"}},
      {"enum_const_and_type_list",
       R"({"type": "object", "properties": {"color": {"enum": ["red", "green", null]}, "v": {"const": 1},
           "n": {"type": ["string", "null"]}}, "required": ["color", "v", "n"], "additionalProperties": false})",
       {R"({"color":"red","v":1,"n":null})", R"({"color":null,"v":1,"n":"x"})"},
       {R"({"color":"blue","v":1,"n":null})", R"({"color":"red","v":2,"n":null})",
        R"({"color":"red","v":1,"n":1})"}},
      {"array_bounds",
       R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[ 1, 2, 3 ]", "[1,2]"},
       {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]", "[1 ,2]"}},
      {"prefix_items",
       R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": false})",
       {"[]", R"(["a"])", R"(["a",true])"},
       {R"([true])", R"(["a",true,1])", R"(["a","b"])"}},
      {"any_of_and_defs",
       R"({"$defs": {"tree": {"type": "object", "properties": {"v": {"type": "integer"},
           "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}, "required": ["v"],
           "additionalProperties": false}},
           "anyOf": [{"$ref": "#/$defs/tree"}, {"type": "boolean"}]})",
       {"true", R"({"v":1})", R"({"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]})"},
       {"null", R"({"v":1,"kids":[{"v":"x"}]})", R"({"kids":[]})"}},
      {"formats",
       R"({"type": "array", "prefixItems": [{"type": "string", "format": "date-time"},
           {"type": "string", "format": "uuid"}], "items": false, "minItems": 2})",
       {R"(["2024-02-29T13:05:00Z","123e4567-e89b-12d3-a456-426614174000"])",
        R"(["2024-12-01T23:59:59.5+01:00","00000000-0000-0000-0000-000000000000"])"},
       {R"(["2024-13-01T00:00:00Z","123e4567-e89b-12d3-a456-426614174000"])",
        R"(["2024-12-01 00:00:00Z","123e4567-e89b-12d3-a456-426614174000"])",
        R"(["2024-12-01T00:00:00Z","123e4567"])"}},
      {"pattern",
       R"({"type": "array", "items": {"type": "string", "pattern": "^[A-Z]{2}-\\d+(\\.[a-z\"]+)?$|x$"}})",
       {R"(["AB-12","ZZ-0.q\"r","yx","x"])", "[]"},
       {R"(["AB-"])", R"(["ab-1"])", R"(["AB-1."])", R"(["AB-1x2"])", R"(["x "])"}},
      {"any_value", "{}", {"null", "[]", R"({"a":[1,"x",false]})", "-0.25"}, {"nul", "[1 ]]", "'a'"}},
  };
  return list;
}

using testing::compile;
using testing::sentence;

TEST(JsonSchemaGrammar, AcceptsValidDocumentsAndRefusesNearMisses) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::string text = gbnf(c.schema);
    std::shared_ptr<const Grammar> grammar;
    ASSERT_NO_THROW(grammar = compile(text)) << text;
    for (const std::string& doc : c.accepted) {
      ASSERT_TRUE(json::accept(doc)) << "test bug: not JSON: " << doc;
      EXPECT_TRUE(sentence(grammar, doc)) << "refused: " << doc << "\n" << text;
    }
    for (const std::string& doc : c.refused)
      EXPECT_FALSE(sentence(grammar, doc)) << "accepted: " << doc << "\n" << text;
  }
}

TEST(JsonSchemaGrammar, PropertyOrderFollowsTheJsonType) {
  const char* schema =
      R"({"properties": {"b": {"type": "null"}, "a": {"type": "null"}}, "required": ["b", "a"]})";
  auto ordered = compile(json_schema_to_gbnf(ordered_json::parse(schema)));
  auto sorted = compile(json_schema_to_gbnf(json::parse(schema)));
  EXPECT_TRUE(sentence(ordered, R"({"b":null,"a":null})"));
  EXPECT_TRUE(sentence(sorted, R"({"a":null,"b":null})"));
  EXPECT_FALSE(sentence(sorted, R"({"b":null,"a":null})"));
}

TEST(JsonSchemaGrammar, ObjectGrammarAcceptsObjectsOnly) {
  auto grammar = compile(json_object_gbnf());
  EXPECT_TRUE(sentence(grammar, R"({"a": {"b": [1, 2]}, "c": "d"})"));
  EXPECT_FALSE(sentence(grammar, "[1]"));
  GrammarMatcher matcher(grammar);  // a bounded amount of whitespace only
  EXPECT_TRUE(matcher.accept("{ "));
  EXPECT_FALSE(matcher.accept(" "));
}

}  // namespace
}  // namespace tokenmill
