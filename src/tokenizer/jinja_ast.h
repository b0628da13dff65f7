// The parsed form of a template: expressions and statements as jinja2's parser builds them.
//
// Nodes are plain tagged records (one struct per family, fields used according to `kind`)
// so the evaluator is a switch per family. Each node keeps the byte offset of its first
// token for error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tokenmill::jinja {

enum class ExprKind : std::uint8_t {
  kLiteral,    // literal
  kName,       // name
  kGetattr,    // operands[0] . name
  kGetitem,    // operands[0] [ operands[1] ]
  kSlice,      // [start:stop:step]: operands[0..2], each may be null
  kCall,       // operands[0] ( operands[1..], keywords, star_args, star_kwargs )
  kFilter,     // operands[0] | name ( operands[1..], keywords ); operands[0] null in filter blocks
  kTest,       // operands[0] is name ( operands[1..], keywords )
  kNot,        // not operands[0]
  kNegate,     // - operands[0]
  kPlus,       // + operands[0]
  kBinary,     // operands[0] op operands[1]: + - * / // % **
  kAnd,        // operands[0] and operands[1]
  kOr,         // operands[0] or operands[1]
  kConcat,     // operands joined with ~
  kCompare,    // operands[0] ops[0] operands[1] ops[1] operands[2] ...
  kCondition,  // operands[1] if operands[0] else operands[2] (operands[2] may be null)
  kList,       // [ operands ]
  kTuple,      // ( operands )
  kDict,       // { operands[0]: operands[1], ... }
  kNsRef,      // name . attr (assignment target only)
};

enum class LiteralKind : std::uint8_t { kNone, kBool, kInt, kFloat, kString };

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  std::size_t offset = 0;
  std::string name;  // kName, kGetattr, kFilter, kTest, kNsRef; the operator of kBinary
  std::string attr;  // kNsRef
  std::vector<std::unique_ptr<Expr>> operands;
  std::vector<std::string> ops;  // kCompare: == != < <= > >= in notin
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> keywords;
  std::unique_ptr<Expr> star_args;
  std::unique_ptr<Expr> star_kwargs;
  // kLiteral
  LiteralKind literal = LiteralKind::kNone;
  std::int64_t integer = 0;
  double number = 0;
  std::string text;
};

enum class StmtKind : std::uint8_t {
  kOutput,       // template data and {{ expressions }}
  kIf,           // tests[i] -> bodies[i]; else_body
  kFor,          // for target in iter [if test] [recursive]: body, else_body
  kSet,          // set target = value
  kSetBlock,     // set target [| filter]: body
  kMacro,        // macro name(params, defaults): body
  kFilterBlock,  // filter chain: body
  kWith,         // with targets = values: body
  kBreak,
  kContinue,
  kScope,  // a body rendered in place (transformers' {% generation %})
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct OutputPiece {
  std::string data;            // template data, when expr is null
  std::unique_ptr<Expr> expr;  // an expression to print
};

struct Stmt {
  StmtKind kind = StmtKind::kOutput;
  std::size_t offset = 0;
  std::vector<OutputPiece> pieces;              // kOutput
  std::vector<std::unique_ptr<Expr>> tests;     // kIf
  std::vector<Body> bodies;                     // kIf
  std::unique_ptr<Expr> target;                 // kFor, kSet, kSetBlock
  std::unique_ptr<Expr> value;                  // kFor (iterable), kSet
  std::unique_ptr<Expr> condition;              // kFor filter
  std::unique_ptr<Expr> filter;                 // kSetBlock, kFilterBlock (innermost operand null)
  std::vector<std::unique_ptr<Expr>> targets;   // kWith
  std::vector<std::unique_ptr<Expr>> values;    // kWith
  std::string name;                             // kMacro
  std::vector<std::string> params;              // kMacro
  std::vector<std::unique_ptr<Expr>> defaults;  // kMacro: for the last defaults.size() params
  bool recursive = false;                       // kFor
  bool uses_varargs = false;                    // kMacro
  bool uses_kwargs = false;                     // kMacro
  Body body;
  Body else_body;  // kIf, kFor
};

struct Template {
  std::string source;  // normalized; offsets refer to it
  Body body;
};

}  // namespace tokenmill::jinja
