// JSON Schema -> GBNF: the grammar behind OpenAI's response_format {"type": "json_schema"}
// and {"type": "json_object"}, in the GBNF dialect of grammar.h (llama.cpp's), root rule "root".
//
// The grammar accepts compact JSON only: a single optional space (rule `ws ::= " "?`) may follow
// `{`, `[`, `,`, `:` and precede `}`, `]`; nothing else, so a weak model cannot emit whitespace
// forever. Within that, it accepts the texts valid against the schema, with the limits below.
//
// Supported keywords
//   type (a name or an array of names), enum, const, anyOf, oneOf (treated as anyOf),
//   allOf with one element, $ref to a local JSON pointer ("#", "#/$defs/X", "#/definitions/X",
//   any "#/..."; one rule per target, so recursive schemas work), the boolean schemas true / {}
//   (any JSON value) and false (only as `items`, `additionalProperties` or a property: none).
//   strings: minLength, maxLength (in code points; an escape counts as one), format "date",
//     "time", "date-time", "uuid" (other formats are ignored: any string), pattern (alone or
//     beside `type`) in a subset of ECMA-262: literals, `.`, classes [a-z] [^...], \d \w \s
//     \D \W \S, escapes \t \n \r \f \v \xHH \uHHHH and escaped punctuation, groups (...)
//     and (?:...), `|`, quantifiers * + ? {m} {m,} {m,n} (lazy ones alike), ^ and $ at the ends
//     of top-level alternatives; unanchored ends match anything (JSON Schema searches).
//     Refused: backreferences, lookaround, \b, flags, anchors inside the pattern.
//   integer: minimum, maximum, exclusiveMinimum, exclusiveMaximum (any sign; non-integral
//     bounds are rounded inward), as digit-by-digit ranges.
//   number: minimum, maximum, exclusiveMinimum, exclusiveMaximum with integral values (a
//     bounded number has no exponent part).
//   object: properties (in the order the schema's JSON object iterates them: alphabetical for
//     nlohmann::json, document order for nlohmann::ordered_json), required, additionalProperties
//     (false, true or a schema: further keys after the listed ones; they are not checked against
//     the listed names).
//   array: items, prefixItems, minItems, maxItems; legacy items-as-array with additionalItems.
//   Ignored annotations: $schema, $id, $comment, $defs, definitions, title, description, default,
//   examples, deprecated, readOnly, writeOnly.
//
// Deliberate narrowings (the grammar accepts fewer texts than the schema allows):
//   - An object schema with `properties` and no `additionalProperties` allows only the listed
//     properties (as OpenAI's strict mode requires anyway); with neither, any object.
//   - Properties appear in schema order, each at most once.
//   - enum/const values must be written exactly as nlohmann::json serializes them compactly
//     (object keys sorted for nlohmann::json, non-ASCII characters unescaped).
//   - Strings matching a pattern are written in the one JSON encoding nlohmann::json uses
//     (no \/ nor \u escapes except for control characters); classes and `.` never match
//     control characters other than \t \n \r \f \b.
//   - Integers have at most 16 digits and no fraction part (10.0 is a number, not an integer);
//     fractions have at most 16 digits, exponents at most 3.
//   - minLength, maxLength, minItems, maxItems above 10000 are refused (GBNF's repetition limit),
//     and so are schemas (or pattern groups) nested deeper than 64.
//
// Size: n optional properties before the first required one cost O(n^2) symbols (one
// alternative per first present property); everything else is linear in the schema. A $ref
// cycle that consumes nothing ({"$ref": "#"}) yields a left-recursive rule that
// Grammar::parse_gbnf refuses.
//
// Refused with an Error naming the JSON pointer and the keyword: every other keyword
// (multipleOf, not, if/then/else, minProperties, uniqueItems: true, contains, ...), unknown types,
// remote or dangling $ref, $ref / anyOf / allOf beside other constraining keywords, allOf with
// several elements, non-integral bounds on numbers, and contradictions (minItems > maxItems,
// minimum > maximum, a required property that is not listed or is false, an empty enum, an enum
// value outside `type`).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill {

// GBNF text (root rule "root") accepting exactly the JSON texts valid against `schema`, within
// the limits above. Throws Error naming the JSON pointer and keyword for anything unsupported or
// contradictory.
std::string json_schema_to_gbnf(const nlohmann::json& schema);
// The same for a schema parsed with nlohmann::ordered_json, which keeps `properties` in
// document order.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// GBNF for any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

}  // namespace tokenmill
