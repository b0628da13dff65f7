#include "tokenizer/jinja_eval.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "tokenizer/jinja_filters.h"
#include "tokenizer/jinja_methods.h"
#include "tokenizer/jinja_predicates.h"
#include "tokenizer/jinja_printf.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

// Bounds the evaluator's recursion (nested expressions and statements, across macro calls).
constexpr int kMaxEvalDepth = 1000;

class DepthGuard {
 public:
  explicit DepthGuard(int& depth) : depth_(depth) {
    if (++depth_ > kMaxEvalDepth)
      eval_fail(fmt::format("template evaluation nested more than {} levels deep", kMaxEvalDepth));
  }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

class CallGuard {
 public:
  explicit CallGuard(Budget& budget) : budget_(budget) { budget_.enter_call(); }
  ~CallGuard() { budget_.leave_call(); }
  CallGuard(const CallGuard&) = delete;
  CallGuard& operator=(const CallGuard&) = delete;

 private:
  Budget& budget_;
};

[[noreturn]] void fail_overflow() { eval_fail("integer overflow (template integers are 64-bit)"); }

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail_overflow();
  return r;
}
std::int64_t checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) fail_overflow();
  return r;
}
std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail_overflow();
  return r;
}

// Python's float floor division and modulo (float_divmod).
double python_fmod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double python_floordiv(double a, double b) {
  const double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && (b < 0) != (mod < 0)) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

[[noreturn]] void fail_operands(std::string_view op, const Value& a, const Value& b) {
  eval_fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
}

std::size_t line_of(std::string_view source, std::size_t offset) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < offset && i < source.size(); ++i) line += source[i] == '\n';
  return line;
}

}  // namespace

std::string Interpreter::render(Scope* context) {
  std::string out;
  exec_body(template_.body, context, out);
  return out;
}

// ---- statements -----------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const Body& body, Scope* scope, std::string& out) {
  for (const auto& stmt : body) {
    const Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, Scope* scope, std::string& out) {
  DepthGuard guard(depth_);
  try {
    return exec_impl(stmt, scope, out);
  } catch (EvalError& e) {
    if (e.offset == EvalError::kNoOffset) e.offset = stmt.offset;
    throw;
  }
}

Interpreter::Flow Interpreter::exec_impl(const Stmt& stmt, Scope* scope, std::string& out) {
  switch (stmt.kind) {
    case StmtKind::kOutput:
      for (const OutputPiece& piece : stmt.pieces) {
        if (piece.expr) {
          write(out, eval(*piece.expr, scope));
        } else {
          budget().check_string_size(out.size() + piece.data.size());
          budget().charge(piece.data.size());
          out += piece.data;
        }
      }
      return Flow::kNormal;
    case StmtKind::kIf:
      for (std::size_t i = 0; i < stmt.tests.size(); ++i) {
        if (truthy(eval(*stmt.tests[i], scope))) return exec_body(stmt.bodies[i], scope, out);
      }
      return exec_body(stmt.else_body, scope, out);
    case StmtKind::kFor: return run_loop(stmt, scope, eval(*stmt.value, scope), 0, out);
    case StmtKind::kSet: assign(*stmt.target, eval(*stmt.value, scope), scope); return Flow::kNormal;
    case StmtKind::kSetBlock: {
      Scope* inner = heap_.scope(scope);
      std::string buffer;
      if (const Flow flow = exec_body(stmt.body, inner, buffer); flow != Flow::kNormal) return flow;
      Value value = heap_.string(std::move(buffer));
      if (stmt.filter) value = eval_filter_chain(*stmt.filter, value, inner);
      assign(*stmt.target, value, scope);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      Callable macro;
      macro.kind = CallableKind::kMacro;
      macro.name = stmt.name;
      macro.macro = &stmt;
      macro.closure = scope;
      scope->set(stmt.name, heap_.callable(macro));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      Scope* inner = heap_.scope(scope);
      std::string buffer;
      if (const Flow flow = exec_body(stmt.body, inner, buffer); flow != Flow::kNormal) return flow;
      write(out, eval_filter_chain(*stmt.filter, heap_.string(std::move(buffer)), inner));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const auto& value : stmt.values) values.push_back(eval(*value, scope));
      Scope* inner = heap_.scope(scope);
      for (std::size_t i = 0; i < stmt.targets.size(); ++i) assign(*stmt.targets[i], values[i], inner);
      return exec_body(stmt.body, inner, out);
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kScope: exec_body(stmt.body, heap_.scope(scope), out); return Flow::kNormal;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::run_loop(const Stmt& stmt, Scope* scope, const Value& iterable,
                                        std::size_t depth0, std::string& out) {
  std::vector<Value> items = iterate(iterable);
  if (stmt.condition) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      budget().count_iteration();
      Scope* filter_scope = heap_.scope(scope);
      assign(*stmt.target, item, filter_scope);
      if (truthy(eval(*stmt.condition, filter_scope))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const List* list = &heap_.list(std::move(items)).as_list();
  LoopState* state = heap_.loop_state();
  state->items = list;
  state->depth0 = depth0;
  state->stmt = &stmt;
  state->scope = scope;
  const Value loop = Value::from_loop(state);
  // jinja2 runs the else block unless some iteration reached the end of the body: a loop whose
  // iterations all end in break or continue runs it too.
  bool completed_an_iteration = false;
  for (std::size_t i = 0; i < list->items.size(); ++i) {
    budget().count_iteration();
    state->index0 = i;
    Scope* iteration = heap_.scope(scope);
    assign(*stmt.target, list->items[i], iteration);
    iteration->set("loop", loop);
    const Flow flow = exec_body(stmt.body, iteration, out);
    if (flow == Flow::kNormal) completed_an_iteration = true;
    if (flow == Flow::kBreak) break;
  }
  if (!completed_an_iteration) return exec_body(stmt.else_body, heap_.scope(scope), out);
  return Flow::kNormal;
}

void Interpreter::assign(const Expr& target, const Value& value, Scope* scope) {
  switch (target.kind) {
    case ExprKind::kName: scope->set(target.name, value); return;
    case ExprKind::kTuple: {
      const std::vector<Value> items = iterate(value);
      const std::size_t expected = target.operands.size();
      if (items.size() < expected) {
        eval_fail(fmt::format("not enough values to unpack (expected {}, got {})", expected, items.size()));
      }
      if (items.size() > expected)
        eval_fail(fmt::format("too many values to unpack (expected {})", expected));
      for (std::size_t i = 0; i < expected; ++i) assign(*target.operands[i], items[i], scope);
      return;
    }
    case ExprKind::kNsRef: {
      const Value ns = lookup(scope, target.name);
      if (!ns.is(Kind::kNamespace)) eval_fail("cannot assign attribute on non-namespace object");
      if (!target.attr.empty() && target.attr[0] == '_') {
        eval_fail(fmt::format(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'",
            target.attr));
      }
      Dict& attrs = ns.as_namespace().attrs;
      for (auto& [key, existing] : attrs.entries) {
        if (key.is_string() && key.as_string() == target.attr) {
          existing = value;
          return;
        }
      }
      attrs.entries.emplace_back(Value::from_string(&target.attr), value);
      budget().charge(2);
      return;
    }
    default: eval_fail("cannot assign to this expression");
  }
}

// ---- expressions ----------------------------------------------------------------------

Value Interpreter::eval(const Expr& expr, Scope* scope) {
  DepthGuard guard(depth_);
  try {
    return eval_impl(expr, scope);
  } catch (EvalError& e) {
    if (e.offset == EvalError::kNoOffset) e.offset = expr.offset;
    throw;
  }
}

Value Interpreter::eval_impl(const Expr& expr, Scope* scope) {
  const auto& ops = expr.operands;
  switch (expr.kind) {
    case ExprKind::kLiteral:
      switch (expr.literal) {
        case LiteralKind::kNone: return Value::none();
        case LiteralKind::kBool: return Value::from_bool(expr.integer != 0);
        case LiteralKind::kInt: return Value::from_int(expr.integer);
        case LiteralKind::kFloat: return Value::from_float(expr.number);
        case LiteralKind::kString: return Value::from_string(&expr.text);
      }
      return Value::none();
    case ExprKind::kName: return lookup(scope, expr.name);
    case ExprKind::kGetattr: return getattr(eval(*ops[0], scope), expr.name);
    case ExprKind::kGetitem: {
      const Value obj = eval(*ops[0], scope);
      if (ops[1]->kind == ExprKind::kSlice) return slice(obj, *ops[1], scope);
      return getitem(obj, eval(*ops[1], scope));
    }
    case ExprKind::kSlice: eval_fail("a slice can only be used in a subscript");
    case ExprKind::kCall: {
      const Value callee = eval(*ops[0], scope);
      return call(callee, eval_args(expr, 1, scope));
    }
    case ExprKind::kFilter: {
      const Value subject = eval(*ops[0], scope);
      return filter(expr.name, subject, eval_args(expr, 1, scope));
    }
    case ExprKind::kTest: {
      const Value subject = eval(*ops[0], scope);
      return Value::from_bool(test(expr.name, subject, eval_args(expr, 1, scope)));
    }
    case ExprKind::kNot: return Value::from_bool(!truthy(eval(*ops[0], scope)));
    case ExprKind::kNegate:
    case ExprKind::kPlus: {
      const Value v = eval(*ops[0], scope);
      if (v.is_undefined()) fail_undefined(v);
      const bool negate = expr.kind == ExprKind::kNegate;
      if (v.is_integral()) return Value::from_int(negate ? checked_sub(0, v.as_int()) : v.as_int());
      if (v.is(Kind::kFloat)) return Value::from_float(negate ? -v.as_float() : v.as_float());
      eval_fail(fmt::format("bad operand type for unary {}: '{}'", negate ? '-' : '+', type_name(v)));
    }
    case ExprKind::kBinary: {
      const Value a = eval(*ops[0], scope);
      const Value b = eval(*ops[1], scope);
      return eval_binary(expr, a, b);
    }
    case ExprKind::kAnd: {
      const Value a = eval(*ops[0], scope);
      return truthy(a) ? eval(*ops[1], scope) : a;
    }
    case ExprKind::kOr: {
      const Value a = eval(*ops[0], scope);
      return truthy(a) ? a : eval(*ops[1], scope);
    }
    case ExprKind::kConcat: {
      std::string text;
      for (const auto& operand : ops) append_str(text, eval(*operand, scope), budget());
      return heap_.string(std::move(text));
    }
    case ExprKind::kCompare: {
      Value left = eval(*ops[0], scope);
      for (std::size_t i = 0; i < expr.ops.size(); ++i) {
        const Value right = eval(*ops[i + 1], scope);
        if (!compare(expr.ops[i], left, right)) return Value::from_bool(false);
        left = right;
      }
      return Value::from_bool(true);
    }
    case ExprKind::kCondition:
      if (truthy(eval(*ops[0], scope))) return eval(*ops[1], scope);
      if (ops[2]) return eval(*ops[2], scope);
      return heap_.undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          line_of(template_.source, expr.offset)));
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(ops.size());
      for (const auto& operand : ops) items.push_back(eval(*operand, scope));
      return heap_.list(std::move(items),
                        expr.kind == ExprKind::kList ? ListFlavor::kList : ListFlavor::kTuple);
    }
    case ExprKind::kDict: {
      Dict dict;
      for (std::size_t i = 0; i + 1 < ops.size(); i += 2) {
        const Value key = eval(*ops[i], scope);
        check_hashable(key);
        const Value value = eval(*ops[i + 1], scope);
        bool replaced = false;
        for (auto& [k, v] : dict.entries) {
          if (equals(k, key)) {
            v = value;
            replaced = true;
            break;
          }
        }
        if (!replaced) dict.entries.emplace_back(key, value);
      }
      return heap_.dict(std::move(dict));
    }
    case ExprKind::kNsRef: eval_fail("a namespace attribute reference can only be assigned to");
  }
  return Value();
}

Value Interpreter::eval_filter_chain(const Expr& filter_expr, const Value& body, Scope* scope) {
  const Value subject =
      filter_expr.operands[0] ? eval_filter_chain(*filter_expr.operands[0], body, scope) : body;
  return filter(filter_expr.name, subject, eval_args(filter_expr, 1, scope));
}

CallArgs Interpreter::eval_args(const Expr& call, std::size_t first_operand, Scope* scope) {
  CallArgs args;
  for (std::size_t i = first_operand; i < call.operands.size(); ++i) {
    args.positional.push_back(eval(*call.operands[i], scope));
  }
  if (call.star_args) {
    for (const Value& v : iterate(eval(*call.star_args, scope))) args.positional.push_back(v);
  }
  for (const auto& [key, value] : call.keywords) args.keywords.emplace_back(key, eval(*value, scope));
  if (call.star_kwargs) {
    const Value kwargs = eval(*call.star_kwargs, scope);
    if (!kwargs.is(Kind::kDict)) {
      eval_fail(fmt::format("argument after ** must be a mapping, not {}", type_name(kwargs)));
    }
    for (const auto& [key, value] : kwargs.as_dict().entries) {
      if (!key.is_string()) eval_fail("keywords must be strings");
      args.keywords.emplace_back(key.as_string(), value);
    }
  }
  return args;
}

Value Interpreter::add(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_integral() && b.is_integral()) return Value::from_int(checked_add(a.as_int(), b.as_int()));
  if (a.is_number() && b.is_number()) return Value::from_float(a.to_double() + b.to_double());
  if (a.is_string()) {
    if (!b.is_string()) eval_fail(fmt::format("can only concatenate str (not \"{}\") to str", type_name(b)));
    budget().check_string_size(a.as_string().size() + b.as_string().size());
    return heap_.string(a.as_string() + b.as_string());
  }
  if (a.is(Kind::kList) &&
      (a.as_list().flavor == ListFlavor::kList || a.as_list().flavor == ListFlavor::kTuple)) {
    if (!b.is(Kind::kList) || b.as_list().flavor != a.as_list().flavor) {
      eval_fail(fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b),
                            type_name(a)));
    }
    budget().charge(a.as_list().items.size() + b.as_list().items.size());
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return heap_.list(std::move(items), a.as_list().flavor);
  }
  fail_operands("+", a, b);
}

Value Interpreter::eval_binary(const Expr& expr, const Value& a, const Value& b) {
  const std::string& op = expr.name;
  if (op == "+") return add(a, b);
  // str % x formats before x is looked at, even when x is undefined (it prints as "").
  if (op == "%" && a.is_string()) return heap_.string(percent_format(a.as_string(), b, budget()));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool ints = a.is_integral() && b.is_integral();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "-") {
    if (ints) return Value::from_int(checked_sub(a.as_int(), b.as_int()));
    if (numbers) return Value::from_float(a.to_double() - b.to_double());
    fail_operands("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::from_int(checked_mul(a.as_int(), b.as_int()));
    if (numbers) return Value::from_float(a.to_double() * b.to_double());
    const Value& seq = a.is_integral() ? b : a;
    const Value& count = a.is_integral() ? a : b;
    if (!count.is_integral()) fail_operands("*", a, b);
    const std::int64_t n = std::max<std::int64_t>(count.as_int(), 0);
    const auto times = static_cast<std::size_t>(n);
    if (seq.is_string()) {
      std::size_t total = 0;
      if (__builtin_mul_overflow(seq.as_string().size(), times, &total)) total = static_cast<std::size_t>(-1);
      budget().check_string_size(total);
      std::string text;
      text.reserve(total);
      for (std::size_t i = 0; i < times; ++i) text += seq.as_string();
      return heap_.string(std::move(text));
    }
    if (seq.is(Kind::kList) &&
        (seq.as_list().flavor == ListFlavor::kList || seq.as_list().flavor == ListFlavor::kTuple)) {
      std::size_t total = 0;
      if (__builtin_mul_overflow(seq.as_list().items.size(), times, &total))
        total = static_cast<std::size_t>(-1);
      budget().charge(total);
      std::vector<Value> items;
      items.reserve(total);
      for (std::size_t i = 0; i < times; ++i) {
        items.insert(items.end(), seq.as_list().items.begin(), seq.as_list().items.end());
      }
      return heap_.list(std::move(items), seq.as_list().flavor);
    }
    fail_operands("*", a, b);
  }
  if (op == "/") {
    if (!numbers) fail_operands("/", a, b);
    if (b.to_double() == 0.0) eval_fail("division by zero");
    return Value::from_float(a.to_double() / b.to_double());
  }
  if (op == "//") {
    if (!numbers) fail_operands("//", a, b);
    if (ints) {
      const std::int64_t x = a.as_int();
      const std::int64_t y = b.as_int();
      if (y == 0) eval_fail("integer division or modulo by zero");
      if (x == std::numeric_limits<std::int64_t>::min() && y == -1) fail_overflow();
      std::int64_t q = x / y;
      if (x % y != 0 && ((x < 0) != (y < 0))) --q;
      return Value::from_int(q);
    }
    if (b.to_double() == 0.0) eval_fail("float floor division by zero");
    return Value::from_float(python_floordiv(a.to_double(), b.to_double()));
  }
  if (op == "%") {
    if (!numbers) fail_operands("%", a, b);
    if (ints) {
      const std::int64_t x = a.as_int();
      const std::int64_t y = b.as_int();
      if (y == 0) eval_fail("integer modulo by zero");
      if (y == -1) return Value::from_int(0);
      std::int64_t r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value::from_int(r);
    }
    if (b.to_double() == 0.0) eval_fail("float modulo");
    return Value::from_float(python_fmod(a.to_double(), b.to_double()));
  }
  if (op == "**") {
    if (!numbers) fail_operands("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      std::int64_t base = a.as_int();
      std::int64_t exp = b.as_int();
      std::int64_t result = 1;
      while (exp > 0) {
        if (exp & 1) result = checked_mul(result, base);
        exp >>= 1;
        if (exp > 0) base = checked_mul(base, base);
      }
      return Value::from_int(result);
    }
    const double x = a.to_double();
    const double y = b.to_double();
    if (x == 0.0 && y < 0) eval_fail("0.0 cannot be raised to a negative power");
    if (x < 0 && std::trunc(y) != y)
      eval_fail("a negative number to a fractional power is complex (not supported)");
    return Value::from_float(std::pow(x, y));
  }
  eval_fail(fmt::format("unknown operator '{}'", op));
}

bool Interpreter::compare(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return equals(a, b);
  if (op == "!=") return !equals(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  return compare_values(a, b, op);
}

bool Interpreter::contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Kind::kString:
      if (!needle.is_string()) {
        eval_fail(fmt::format("'in <string>' requires string as left operand, not {}", type_name(needle)));
      }
      budget().charge(haystack.as_string().size());
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Kind::kList:
      budget().charge(haystack.as_list().items.size());
      for (const Value& item : haystack.as_list().items) {
        if (equals(item, needle)) return true;
      }
      return false;
    case Kind::kDict:
      check_hashable(needle);
      budget().charge(haystack.as_dict().entries.size());
      return haystack.as_dict().find(needle) != nullptr;
    case Kind::kUndefined: return false;
    case Kind::kGenerator: {
      Generator& g = haystack.as_generator();
      while (g.pos < g.items.size()) {
        budget().charge(1);
        if (equals(g.items[g.pos++], needle)) return true;
      }
      return false;
    }
    default: eval_fail(fmt::format("argument of type '{}' is not iterable", type_name(haystack)));
  }
}

Value Interpreter::slice(const Value& obj, const Expr& slice_expr, Scope* scope) {
  // jinja2 compiles x[a:b] to a plain Python subscript (not the sandbox's getitem), so
  // slicing anything but a str, list or tuple raises TypeError.
  if (obj.is_undefined()) fail_undefined(obj);
  std::optional<std::int64_t> bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (!slice_expr.operands[i]) continue;
    const Value v = eval(*slice_expr.operands[i], scope);
    if (v.is_integral()) {
      bounds[i] = v.as_int();
    } else if (!v.is_none()) {
      eval_fail("slice indices must be integers or None or have an __index__ method");
    }
  }
  const bool is_sequence =
      obj.is_string() || (obj.is(Kind::kList) && (obj.as_list().flavor == ListFlavor::kList ||
                                                  obj.as_list().flavor == ListFlavor::kTuple));
  if (obj.is(Kind::kDict)) eval_fail("unhashable type: 'slice'");
  if (!is_sequence) eval_fail(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  const std::int64_t step = bounds[2].value_or(1);
  if (step == 0) eval_fail("slice step cannot be zero");
  std::vector<std::size_t> offsets;
  std::int64_t length = 0;
  if (obj.is_string()) {
    offsets = code_point_offsets(obj.as_string());
    length = static_cast<std::int64_t>(offsets.size()) - 1;
  } else {
    length = static_cast<std::int64_t>(obj.as_list().items.size());
  }
  budget().charge(static_cast<std::size_t>(length));
  // PySlice_AdjustIndices
  const std::int64_t lower = step < 0 ? -1 : 0;
  const std::int64_t upper = step < 0 ? length - 1 : length;
  const auto adjust = [&](std::optional<std::int64_t> bound, std::int64_t fallback) {
    if (!bound) return fallback;
    std::int64_t v = *bound;
    if (v < 0) v = std::max(v + length, lower);
    return std::min(std::max(v, lower), upper);
  };
  const std::int64_t start = adjust(bounds[0], step < 0 ? upper : lower);
  const std::int64_t stop = adjust(bounds[1], step < 0 ? lower : upper);
  std::vector<std::int64_t> indices;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) indices.push_back(i);
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::string text;
    if (step == 1) {
      if (!indices.empty())
        text = s.substr(offsets[indices.front()], offsets[indices.back() + 1] - offsets[indices.front()]);
    } else {
      for (std::int64_t i : indices) text += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
    }
    return heap_.string(std::move(text));
  }
  std::vector<Value> items;
  items.reserve(indices.size());
  for (std::int64_t i : indices) items.push_back(obj.as_list().items[static_cast<std::size_t>(i)]);
  return heap_.list(std::move(items), obj.as_list().flavor);
}

Value Interpreter::lookup(Scope* scope, std::string_view name) {
  for (Scope* s = scope; s != nullptr; s = s->parent) {
    if (Value* v = s->find_local(name)) return *v;
  }
  return heap_.undefined(fmt::format("'{}' is undefined", name));
}

// ---- objects --------------------------------------------------------------------------

Value Interpreter::attribute_only(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (std::optional<Value> attr = builtin_attribute(*this, obj, name)) return *attr;
  return heap_.undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value Interpreter::getattr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (std::optional<Value> attr = builtin_attribute(*this, obj, name)) return *attr;
  if (obj.is(Kind::kDict)) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  }
  return heap_.undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), name));
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  switch (obj.kind()) {
    case Kind::kDict: {
      const bool hashable = !(key.is(Kind::kDict) || key.is(Kind::kList));
      if (hashable || (key.is(Kind::kList) && key.as_list().flavor == ListFlavor::kTuple)) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
      }
      break;
    }
    case Kind::kList: {
      const List& list = obj.as_list();
      if ((list.flavor == ListFlavor::kList || list.flavor == ListFlavor::kTuple) && key.is_integral()) {
        std::int64_t i = key.as_int();
        const auto size = static_cast<std::int64_t>(list.items.size());
        if (i < 0) i += size;
        if (i >= 0 && i < size) return list.items[static_cast<std::size_t>(i)];
      }
      break;
    }
    case Kind::kString:
      if (key.is_integral()) {
        const std::vector<std::size_t> offsets = code_point_offsets(obj.as_string());
        budget().charge(offsets.size());
        const auto size = static_cast<std::int64_t>(offsets.size()) - 1;
        std::int64_t i = key.as_int();
        if (i < 0) i += size;
        if (i >= 0 && i < size) {
          const auto k = static_cast<std::size_t>(i);
          return heap_.string(obj.as_string().substr(offsets[k], offsets[k + 1] - offsets[k]));
        }
      }
      break;
    default: break;
  }
  if (key.is_string()) {
    if (std::optional<Value> attr = builtin_attribute(*this, obj, key.as_string())) return *attr;
    return heap_.undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(obj), key.as_string()));
  }
  std::string key_repr;
  append_repr(key_repr, key, budget());
  return heap_.undefined(fmt::format("{} has no element {}", object_type_repr(obj), key_repr));
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return {};
    case Kind::kList: budget().charge(v.as_list().items.size()); return v.as_list().items;
    case Kind::kDict: {
      std::vector<Value> keys;
      budget().charge(v.as_dict().entries.size());
      for (const auto& entry : v.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      std::size_t pos = 0;
      while (pos < s.size()) {
        const std::size_t begin = pos;
        next_code_point(s, pos);
        chars.push_back(heap_.string(s.substr(begin, pos - begin)));
      }
      return chars;
    }
    case Kind::kGenerator: {
      Generator& g = v.as_generator();
      budget().charge(g.items.size() - g.pos);
      std::vector<Value> rest(g.items.begin() + static_cast<std::ptrdiff_t>(g.pos), g.items.end());
      g.pos = g.items.size();
      return rest;
    }
    default: eval_fail(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

Value Interpreter::call(const Value& callee, const CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is(Kind::kLoop)) {
    // loop(children) in a `recursive` for loop renders the loop body over the children.
    LoopState& loop = callee.as_loop();
    if (!loop.stmt->recursive)
      eval_fail("Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
    if (args.positional.size() != 1 || !args.keywords.empty()) eval_fail("loop() takes exactly one argument");
    CallGuard guard(budget());
    std::string buffer;
    run_loop(*loop.stmt, loop.scope, args.positional[0], loop.depth0 + 1, buffer);
    return heap_.string(std::move(buffer));
  }
  if (!callee.is(Kind::kCallable)) eval_fail(fmt::format("'{}' object is not callable", type_name(callee)));
  const Callable& fn = callee.as_callable();
  if (fn.kind == CallableKind::kMacro) return call_macro(fn, args);
  return call_builtin(*this, fn, args);
}

Value Interpreter::call_macro(const Callable& fn, const CallArgs& args) {
  const Stmt& macro = *fn.macro;
  CallGuard guard(budget());
  Scope* scope = heap_.scope(fn.closure);
  const std::size_t count = macro.params.size();
  std::vector<std::optional<Value>> bound(count);
  std::vector<Value> varargs;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < count) {
      bound[i] = args.positional[i];
    } else if (macro.uses_varargs) {
      varargs.push_back(args.positional[i]);
    } else {
      eval_fail(fmt::format("macro '{}' takes not more than {} argument(s)", macro.name, count));
    }
  }
  Dict kwargs;
  for (const auto& [key, value] : args.keywords) {
    std::size_t index = 0;
    while (index < count && macro.params[index] != key) ++index;
    if (index < count) {
      if (bound[index])
        eval_fail(fmt::format("macro '{}' got multiple values for argument '{}'", macro.name, key));
      bound[index] = value;
    } else if (macro.uses_kwargs) {
      kwargs.entries.emplace_back(heap_.string(key), value);
    } else {
      eval_fail(fmt::format("macro '{}' takes no keyword argument '{}'", macro.name, key));
    }
  }
  const std::size_t first_default = count - macro.defaults.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (bound[i]) {
      scope->set(macro.params[i], *bound[i]);
    } else if (i >= first_default) {
      scope->set(macro.params[i], eval(*macro.defaults[i - first_default], scope));
    } else {
      scope->set(macro.params[i],
                 heap_.undefined(fmt::format("parameter '{}' was not provided", macro.params[i])));
    }
  }
  scope->set("varargs", heap_.list(std::move(varargs), ListFlavor::kTuple));
  scope->set("kwargs", heap_.dict(std::move(kwargs)));
  std::string buffer;
  exec_body(macro.body, scope, buffer);
  return heap_.string(std::move(buffer));
}

Value Interpreter::filter(std::string_view name, const Value& subject, const CallArgs& args) {
  return apply_filter(*this, name, subject, args);
}

bool Interpreter::test(std::string_view name, const Value& subject, const CallArgs& args) {
  return apply_test(*this, name, subject, args);
}

void Interpreter::write(std::string& out, const Value& v) { append_str(out, v, budget()); }

}  // namespace tokenmill::jinja
