// The values a chat template computes with: Python's None, bool, int, float, str, list,
// tuple, dict, plus Jinja's Undefined, namespace(), loop and generators.
//
// Every container, string and scope one render creates lives in that render's Heap and is
// freed with it, all at once: Values are small trivially-copyable handles (raw pointers into
// the Heap or into the parsed template), reference cycles cannot leak, and nothing is
// destroyed recursively. Containers are immutable once built (the sandbox transformers uses
// forbids list.append and friends); only namespace attributes change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tokenmill::jinja {

struct Stmt;

// Raised inside the interpreter (Python's exceptions: TypeError, UndefinedError, ...);
// ChatTemplate reports it as tokenmill::Error with the line:column of the innermost
// expression or statement being evaluated.
class EvalError : public std::runtime_error {
 public:
  static constexpr std::size_t kNoOffset = static_cast<std::size_t>(-1);
  explicit EvalError(const std::string& message) : std::runtime_error(message) {}
  std::size_t offset = kNoOffset;
  bool raised_by_template = false;  // raise_exception() in the template
};

[[noreturn]] void eval_fail(const std::string& message);

// Enforces ChatTemplateLimits over one render.
class Budget {
 public:
  explicit Budget(const ChatTemplateLimits& limits) : limits_(limits) {}
  const ChatTemplateLimits& limits() const { return limits_; }
  // Counts `units` of work (bytes or elements produced or scanned).
  void charge(std::size_t units);
  void count_iteration();
  // A string of `size` bytes is about to be produced.
  void check_string_size(std::size_t size) const;
  void enter_call();
  void leave_call() { --call_depth_; }

 private:
  ChatTemplateLimits limits_;
  std::size_t work_ = 0;
  std::size_t iterations_ = 0;
  std::size_t call_depth_ = 0;
};

struct List;
struct Dict;
struct Namespace;
struct Callable;
struct Generator;
struct LoopState;

enum class Kind : std::uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable,
  kGenerator,
  kLoop,
};

class Value {
 public:
  Value() = default;  // undefined, with the generic message
  static Value undefined(const std::string* hint) {
    Value v;
    v.string_ = hint;
    return v;
  }
  static Value none() { return with_kind(Kind::kNone); }
  static Value from_bool(bool b) {
    Value v = with_kind(Kind::kBool);
    v.int_ = b ? 1 : 0;
    return v;
  }
  static Value from_int(std::int64_t i) {
    Value v = with_kind(Kind::kInt);
    v.int_ = i;
    return v;
  }
  static Value from_float(double d) {
    Value v = with_kind(Kind::kFloat);
    v.float_ = d;
    return v;
  }
  // `s` must outlive the value: it lives in the Heap or in the parsed template.
  static Value from_string(const std::string* s) {
    Value v = with_kind(Kind::kString);
    v.string_ = s;
    return v;
  }
  static Value from_list(const List* l) {
    Value v = with_kind(Kind::kList);
    v.list_ = l;
    return v;
  }
  static Value from_dict(const Dict* d) {
    Value v = with_kind(Kind::kDict);
    v.dict_ = d;
    return v;
  }
  static Value from_namespace(Namespace* n) {
    Value v = with_kind(Kind::kNamespace);
    v.namespace_ = n;
    return v;
  }
  static Value from_callable(const Callable* c) {
    Value v = with_kind(Kind::kCallable);
    v.callable_ = c;
    return v;
  }
  static Value from_generator(Generator* g) {
    Value v = with_kind(Kind::kGenerator);
    v.generator_ = g;
    return v;
  }
  static Value from_loop(LoopState* l) {
    Value v = with_kind(Kind::kLoop);
    v.loop_ = l;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  // bool, int or float (Python's numbers.Number)
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  // bool or int (Python's int, of which bool is a subclass)
  bool is_integral() const { return kind_ == Kind::kBool || kind_ == Kind::kInt; }

  // Message for an undefined value; null for the generic one.
  const std::string* undefined_hint() const { return string_; }
  bool as_bool() const { return int_ != 0; }
  std::int64_t as_int() const { return int_; }  // bool or int
  double as_float() const { return float_; }
  double to_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Namespace& as_namespace() const { return *namespace_; }
  const Callable& as_callable() const { return *callable_; }
  Generator& as_generator() const { return *generator_; }
  LoopState& as_loop() const { return *loop_; }

 private:
  static Value with_kind(Kind k) {
    Value v;
    v.kind_ = k;
    return v;
  }

  Kind kind_ = Kind::kUndefined;
  union {
    std::int64_t int_;
    double float_;
    const std::string* string_ = nullptr;
    const List* list_;
    const Dict* dict_;
    Namespace* namespace_;
    const Callable* callable_;
    Generator* generator_;
    LoopState* loop_;
  };
};

// How a List prints and serializes: Python has several sequence types over the same data.
enum class ListFlavor : std::uint8_t { kList, kTuple, kDictKeys, kDictValues, kDictItems };

struct List {
  std::vector<Value> items;
  ListFlavor flavor = ListFlavor::kList;
};

// An insertion-ordered dict (Python dicts keep insertion order). Lookups are linear: the
// dicts of a chat are small.
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};

struct Namespace {
  Dict attrs;  // keys are strings
};

// A one-shot iterator (what select, map, reverse, |items... return): truthy even when empty,
// no len(), and iterating it consumes it.
struct Generator {
  std::vector<Value> items;
  std::size_t pos = 0;
  std::string_view type_name;  // for messages: "generator", "list_reverseiterator", ...
};

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string_view, Value>> vars;  // names live in the template or the Heap

  Value* find_local(std::string_view name);
  void set(std::string_view name, Value value);
};

// The state behind a for loop's `loop` variable.
struct LoopState {
  const List* items = nullptr;
  std::size_t index0 = 0;
  std::size_t depth0 = 0;
  const Stmt* stmt = nullptr;  // the for statement, for recursive loop(...) calls
  Scope* scope = nullptr;      // where the for statement runs
  Value last_changed;
  bool has_changed = false;
};

enum class CallableKind : std::uint8_t { kGlobal, kMethod, kMacro, kLoopCycle, kLoopChanged };

struct Callable {
  CallableKind kind = CallableKind::kGlobal;
  std::string_view name;        // global or method name (static storage)
  Value self;                   // the object a method is bound to
  const Stmt* macro = nullptr;  // kMacro
  Scope* closure = nullptr;     // kMacro: the scope the macro was defined in
  LoopState* loop = nullptr;    // kLoopCycle, kLoopChanged
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Owns everything one render allocates; charges the budget for what it stores.
class Heap {
 public:
  explicit Heap(Budget& budget) : budget_(budget) {}
  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  Budget& budget() { return budget_; }
  Value string(std::string s);
  const std::string* intern(std::string s);  // a string that is not (yet) a Value
  Value undefined(std::string hint) { return Value::undefined(intern(std::move(hint))); }
  Value list(std::vector<Value> items, ListFlavor flavor = ListFlavor::kList);
  Value dict(Dict d);
  Value new_namespace(Dict attrs);
  Value generator(std::vector<Value> items, std::string_view type_name);
  Value callable(Callable c);
  Scope* scope(Scope* parent);
  LoopState* loop_state();

 private:
  Budget& budget_;
  std::deque<std::string> strings_;
  std::deque<List> lists_;
  std::deque<Dict> dicts_;
  std::deque<Namespace> namespaces_;
  std::deque<Generator> generators_;
  std::deque<Callable> callables_;
  std::deque<Scope> scopes_;
  std::deque<LoopState> loops_;
};

// Python's type(x).__name__.
std::string_view type_name(const Value& v);
// Jinja's object_type_repr: "dict object", "None", ...
std::string object_type_repr(const Value& v);
bool truthy(const Value& v);
// jinja2's UndefinedError for using `v` (undefined) in arithmetic, a call or a lookup.
[[noreturn]] void fail_undefined(const Value& v);
// Python ==.
bool equals(const Value& a, const Value& b);
// Python's ordering operators: op is "<", "<=", ">" or ">="; TypeError for unordered types.
bool compare_values(const Value& a, const Value& b, std::string_view op);
inline bool less_than(const Value& a, const Value& b) { return compare_values(a, b, "<"); }
// Python raises TypeError for dict keys and `in dict` with a list/dict/namespace.
void check_hashable(const Value& v);

// Python str() and repr(), appended to `out`; the budget bounds their size and nesting.
void append_str(std::string& out, const Value& v, Budget& budget);
void append_repr(std::string& out, const Value& v, Budget& budget);
std::string to_str(const Value& v, Budget& budget);

// Python's repr of a float ("1.0", "1e-05", "inf") and of a str ('it\'s' / "it's"); with a
// budget, the growth of `out` is checked and charged as it happens.
std::string format_float(double d);
void append_string_repr(std::string& out, std::string_view s, Budget* budget = nullptr);

}  // namespace tokenmill::jinja
