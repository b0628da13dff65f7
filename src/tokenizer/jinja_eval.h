// The tree-walking evaluator: runs a parsed Template over a context, with jinja2's
// semantics under transformers' ImmutableSandboxedEnvironment.
//
// Scoping follows jinja2: `set` inside a for-loop body, macro, with, filter or set block
// stays inside it (each loop iteration starts afresh from the enclosing scope); `set` in an
// if-block assigns in the enclosing scope; namespace() attributes are the way out.
// Undefined values print as "" and are falsy, and fail when used in arithmetic, called, or
// looked into, as jinja2's default Undefined does.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter {
 public:
  Interpreter(const Template& tpl, Heap& heap, std::optional<std::tm> now)
      : template_(tpl), heap_(heap), now_(now) {}

  // Renders the template; `context` holds the variables (its parent chain the globals).
  // Throws EvalError (with the offset of the failing node) on a template error.
  std::string render(Scope* context);

  Heap& heap() { return heap_; }
  Budget& budget() { return heap_.budget(); }
  const std::optional<std::tm>& now() const { return now_; }

  // Sandboxed obj.name: attributes and methods first, then obj["name"].
  Value getattr(const Value& obj, std::string_view name);
  // obj.name without the item fallback (the |attr filter).
  Value attribute_only(const Value& obj, std::string_view name);
  // Sandboxed obj[key]: items first, then attributes for string keys.
  Value getitem(const Value& obj, const Value& key);
  // Python iteration (dict: keys, str: characters, Undefined: nothing); consumes generators.
  std::vector<Value> iterate(const Value& v);
  Value call(const Value& callee, const CallArgs& args);
  Value filter(std::string_view name, const Value& subject, const CallArgs& args);
  bool test(std::string_view name, const Value& subject, const CallArgs& args);
  std::string str(const Value& v) { return to_str(v, budget()); }
  Value string(std::string s) { return heap_.string(std::move(s)); }
  // Python a + b (also used by the sum filter).
  Value add(const Value& a, const Value& b);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, Scope* scope, std::string& out);
  Flow exec(const Stmt& stmt, Scope* scope, std::string& out);
  Flow exec_impl(const Stmt& stmt, Scope* scope, std::string& out);
  Flow run_loop(const Stmt& stmt, Scope* scope, const Value& iterable, std::size_t depth0, std::string& out);
  void assign(const Expr& target, const Value& value, Scope* scope);
  Value eval(const Expr& expr, Scope* scope);
  Value eval_impl(const Expr& expr, Scope* scope);
  Value eval_filter_chain(const Expr& filter, const Value& body, Scope* scope);
  CallArgs eval_args(const Expr& call, std::size_t first_operand, Scope* scope);
  Value eval_binary(const Expr& expr, const Value& a, const Value& b);
  bool compare(std::string_view op, const Value& a, const Value& b);
  bool contains(const Value& haystack, const Value& needle);
  Value slice(const Value& obj, const Expr& slice, Scope* scope);
  Value lookup(Scope* scope, std::string_view name);
  Value call_macro(const Callable& macro, const CallArgs& args);
  void write(std::string& out, const Value& v);

  const Template& template_;
  Heap& heap_;
  std::optional<std::tm> now_;
  int depth_ = 0;
};

}  // namespace tokenmill::jinja
