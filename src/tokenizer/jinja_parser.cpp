#include "tokenizer/jinja_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

#include "tokenizer/jinja_filters.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_predicates.h"

namespace tokenmill::jinja {
namespace {

// Deeper nesting than this (brackets, unary operators, blocks) is refused: it keeps the
// recursive parser and evaluator far from the end of the stack.
constexpr int kMaxNesting = 100;

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr make_expr(ExprKind kind, std::size_t offset) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

ExprPtr make_unary(ExprKind kind, std::size_t offset, ExprPtr operand) {
  ExprPtr e = make_expr(kind, offset);
  e->operands.push_back(std::move(operand));
  return e;
}

ExprPtr make_binary(ExprKind kind, std::size_t offset, ExprPtr left, ExprPtr right) {
  ExprPtr e = make_expr(kind, offset);
  e->operands.push_back(std::move(left));
  e->operands.push_back(std::move(right));
  return e;
}

bool can_assign(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kName:
    case ExprKind::kNsRef: return true;
    case ExprKind::kTuple:
      return std::all_of(e.operands.begin(), e.operands.end(),
                         [](const ExprPtr& item) { return can_assign(*item); });
    default: return false;
  }
}

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData: return "template data";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kEof: return "end of template";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    default: return fmt::format("'{}'", t.text);
  }
}

// The end tags that close each block statement, for messages.
struct OpenBlock {
  std::string_view tag;
  std::size_t offset;
};

class Parser {
 public:
  explicit Parser(TokenizedSource tokens)
      : source_(std::move(tokens.source)), tokens_(std::move(tokens.tokens)) {}

  std::unique_ptr<Template> parse() {
    auto tpl = std::make_unique<Template>();
    tpl->body = subparse({});
    if (!unknown_filters_.empty()) {
      const auto& [offset, message] = unknown_filters_.front();
      fail(offset, message);
    }
    tpl->source = std::move(source_);
    return tpl;
  }

 private:
  // ---- token stream -------------------------------------------------------------------
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  static bool is_op(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.text == op;
  }
  static bool is_name(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.text == name;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(current(), op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(current(), name)) return false;
    next();
    return true;
  }
  const Token& expect_op(std::string_view op) {
    if (!is_op(current(), op))
      fail(current().offset, fmt::format("expected '{}', got {}", op, describe(current())));
    return next();
  }
  const Token& expect_name() {
    if (current().type != TokenType::kName)
      fail(current().offset, fmt::format("expected a name, got {}", describe(current())));
    return next();
  }
  void expect(TokenType type, std::string_view what) {
    if (current().type != type)
      fail(current().offset, fmt::format("expected {}, got {}", what, describe(current())));
    next();
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    syntax_error(source_, offset, message);
  }

  class NestingGuard {
   public:
    NestingGuard(Parser& p, std::size_t offset) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) {
        p_.fail(offset, fmt::format("template nested more than {} levels deep", kMaxNesting));
      }
    }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& p_;
  };

  // Left-deep chains (a + b + c, x|f|g, a.b.c) nest the tree one level per link.
  class ChainGuard {
   public:
    explicit ChainGuard(Parser& p) : p_(p) {}
    ~ChainGuard() { p_.nesting_ -= added_; }
    ChainGuard(const ChainGuard&) = delete;
    ChainGuard& operator=(const ChainGuard&) = delete;
    void deepen(std::size_t offset) {
      ++added_;
      if (++p_.nesting_ > kMaxNesting) {
        p_.fail(offset, fmt::format("template nested more than {} levels deep", kMaxNesting));
      }
    }

   private:
    Parser& p_;
    int added_ = 0;
  };

  // Sets a member for the lifetime of the guard.
  template <class T>
  class Override {
   public:
    Override(T& slot, T value) : slot_(slot), saved_(slot) { slot_ = value; }
    ~Override() { slot_ = saved_; }
    Override(const Override&) = delete;
    Override& operator=(const Override&) = delete;

   private:
    T& slot_;
    T saved_;
  };

  // ---- statements ---------------------------------------------------------------------
  bool at_end_tag(const std::vector<std::string_view>& end_tags) const {
    return current().type == TokenType::kName &&
           std::find(end_tags.begin(), end_tags.end(), current().text) != end_tags.end();
  }

  // Parses until a block tag named in end_tags (left as the current token) or the end.
  Body subparse(const std::vector<std::string_view>& end_tags) {
    Body body;
    std::unique_ptr<Stmt> output;
    const auto flush = [&] {
      if (output) body.push_back(std::move(output));
    };
    const auto piece = [&](std::size_t offset) -> OutputPiece& {
      if (!output) {
        output = std::make_unique<Stmt>();
        output->kind = StmtKind::kOutput;
        output->offset = offset;
      }
      return output->pieces.emplace_back();
    };
    while (current().type != TokenType::kEof) {
      const Token& token = current();
      if (token.type == TokenType::kData) {
        piece(token.offset).data = token.text;
        next();
      } else if (token.type == TokenType::kVariableBegin) {
        next();
        piece(token.offset).expr = parse_tuple(false, true, {}, false, false);
        expect(TokenType::kVariableEnd, "end of print statement ('}}')");
      } else if (token.type == TokenType::kBlockBegin) {
        flush();
        next();
        if (at_end_tag(end_tags)) return body;
        body.push_back(parse_statement());
        expect(TokenType::kBlockEnd, "end of statement block ('%}')");
      } else {
        fail(token.offset, fmt::format("unexpected {}", describe(token)));
      }
    }
    flush();
    return body;
  }

  std::string expected_tags(const std::vector<std::string_view>& end_tags) const {
    std::string list;
    for (std::size_t i = 0; i < end_tags.size(); ++i) {
      if (i > 0) list += i + 1 == end_tags.size() ? " or " : ", ";
      list += fmt::format("'{}'", end_tags[i]);
    }
    return list;
  }

  Body parse_statements(const std::vector<std::string_view>& end_tags, bool drop_needle) {
    skip_op(":");
    expect(TokenType::kBlockEnd, "end of statement block ('%}')");
    Body body = subparse(end_tags);
    if (current().type == TokenType::kEof) {
      const OpenBlock& open = open_blocks_.back();
      fail(current().offset,
           fmt::format("unexpected end of template: expected {} to close the '{}' at {}",
                       expected_tags(end_tags), open.tag, describe_position(source_, open.offset)));
    }
    if (drop_needle) next();
    return body;
  }

  std::unique_ptr<Stmt> make_stmt(StmtKind kind, std::size_t offset) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->offset = offset;
    return s;
  }

  std::unique_ptr<Stmt> parse_statement() {
    const Token& token = current();
    if (token.type != TokenType::kName)
      fail(token.offset, fmt::format("expected a tag name, got {}", describe(token)));
    NestingGuard guard(*this, token.offset);
    const std::string tag = token.text;
    open_blocks_.push_back({token.text == "for" ? "for" : token.text == "if" ? "if" : "block", token.offset});
    std::unique_ptr<Stmt> stmt;
    if (tag == "for") {
      stmt = parse_for();
    } else if (tag == "if") {
      stmt = parse_if();
    } else if (tag == "set") {
      stmt = parse_set();
    } else if (tag == "macro") {
      stmt = parse_macro();
    } else if (tag == "with") {
      stmt = parse_with();
    } else if (tag == "filter") {
      stmt = parse_filter_block();
    } else if (tag == "print") {
      stmt = parse_print();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(token.offset, fmt::format("'{}' outside of a for loop", tag));
      next();
      stmt = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, token.offset);
    } else if (tag == "generation") {
      stmt = parse_generation();
    } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
               tag == "call" || tag == "autoescape") {
      fail(token.offset, fmt::format("the '{}' tag is not supported in chat templates", tag));
    } else {
      std::string message = fmt::format("unknown tag '{}'", tag);
      open_blocks_.pop_back();
      if (!open_blocks_.empty() && !end_stack_.empty()) {
        message +=
            fmt::format(" (expected {} to close the '{}' at {})", expected_tags(end_stack_.back()),
                        open_blocks_.back().tag, describe_position(source_, open_blocks_.back().offset));
      }
      fail(token.offset, message);
    }
    open_blocks_.pop_back();
    return stmt;
  }

  Body parse_block_body(std::string_view tag, std::vector<std::string_view> end_tags, bool drop_needle) {
    open_blocks_.back().tag = tag;
    end_stack_.push_back(end_tags);
    Body body = parse_statements(end_tags, drop_needle);
    end_stack_.pop_back();
    return body;
  }

  std::unique_ptr<Stmt> parse_for() {
    auto stmt = make_stmt(StmtKind::kFor, next().offset);
    stmt->target = parse_assign_target(true, false, {"in"}, false);
    if (!is_name(current(), "in"))
      fail(current().offset, fmt::format("expected 'in', got {}", describe(current())));
    next();
    stmt->value = parse_tuple(false, false, {"recursive"}, false, false);
    {
      Override<bool> not_soft(soft_, false);
      if (skip_name("if")) stmt->condition = parse_expression(true);
    }
    stmt->recursive = skip_name("recursive");
    {
      Override<bool> not_soft(soft_, false);
      Override<int> in_loop(loop_depth_, loop_depth_ + 1);
      stmt->body = parse_block_body("for", {"endfor", "else"}, false);
    }
    if (next().text == "else") {
      Override<bool> not_soft(soft_, false);
      stmt->else_body = parse_block_body("for", {"endfor"}, true);
    }
    return stmt;
  }

  std::unique_ptr<Stmt> parse_if() {
    auto stmt = make_stmt(StmtKind::kIf, next().offset);
    Override<bool> soft(soft_, true);
    while (true) {
      stmt->tests.push_back(parse_tuple(false, false, {}, false, false));
      stmt->bodies.push_back(parse_block_body("if", {"elif", "else", "endif"}, false));
      const Token& token = next();
      if (token.text == "elif") continue;
      if (token.text == "else") stmt->else_body = parse_block_body("if", {"endif"}, true);
      break;
    }
    return stmt;
  }

  std::unique_ptr<Stmt> parse_set() {
    const std::size_t offset = next().offset;
    ExprPtr target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto stmt = make_stmt(StmtKind::kSet, offset);
      stmt->target = std::move(target);
      stmt->value = parse_tuple(false, true, {}, false, false);
      return stmt;
    }
    auto stmt = make_stmt(StmtKind::kSetBlock, offset);
    stmt->target = std::move(target);
    Override<bool> not_soft(soft_, false);
    stmt->filter = parse_filter(nullptr, false);
    stmt->body = parse_block_body("set", {"endset"}, true);
    return stmt;
  }

  std::unique_ptr<Stmt> parse_macro() {
    auto stmt = make_stmt(StmtKind::kMacro, next().offset);
    stmt->name = expect_name().text;
    Override<bool> not_soft(soft_, false);
    Override<int> no_loop(loop_depth_, 0);
    macros_.push_back(stmt.get());
    expect_op("(");
    while (!is_op(current(), ")")) {
      if (!stmt->params.empty()) expect_op(",");
      const Token& param = expect_name();
      if (skip_op("=")) {
        stmt->defaults.push_back(parse_expression(true));
      } else if (!stmt->defaults.empty()) {
        fail(param.offset, "non-default argument follows default argument");
      }
      stmt->params.push_back(param.text);
    }
    expect_op(")");
    stmt->body = parse_block_body("macro", {"endmacro"}, true);
    macros_.pop_back();
    return stmt;
  }

  std::unique_ptr<Stmt> parse_with() {
    auto stmt = make_stmt(StmtKind::kWith, next().offset);
    while (current().type != TokenType::kBlockEnd) {
      if (!stmt->targets.empty()) expect_op(",");
      stmt->targets.push_back(parse_assign_target(true, false, {}, false));
      expect_op("=");
      stmt->values.push_back(parse_expression(true));
    }
    Override<bool> not_soft(soft_, false);
    stmt->body = parse_block_body("with", {"endwith"}, true);
    return stmt;
  }

  std::unique_ptr<Stmt> parse_filter_block() {
    auto stmt = make_stmt(StmtKind::kFilterBlock, next().offset);
    Override<bool> not_soft(soft_, false);
    stmt->filter = parse_filter(nullptr, true);
    stmt->body = parse_block_body("filter", {"endfilter"}, true);
    return stmt;
  }

  std::unique_ptr<Stmt> parse_print() {
    auto stmt = make_stmt(StmtKind::kOutput, next().offset);
    while (current().type != TokenType::kBlockEnd) {
      if (!stmt->pieces.empty()) expect_op(",");
      stmt->pieces.emplace_back().expr = parse_expression(true);
    }
    return stmt;
  }

  std::unique_ptr<Stmt> parse_generation() {
    auto stmt = make_stmt(StmtKind::kScope, next().offset);
    Override<bool> not_soft(soft_, false);
    Override<int> no_loop(loop_depth_, 0);
    stmt->body = parse_block_body("generation", {"endgeneration"}, true);
    return stmt;
  }

  // ---- expressions --------------------------------------------------------------------
  ExprPtr parse_assign_target(bool with_tuple, bool name_only, std::vector<std::string_view> extra_end,
                              bool with_namespace) {
    ExprPtr target;
    if (name_only) {
      const Token& t = expect_name();
      target = make_expr(ExprKind::kName, t.offset);
      target->name = t.text;
    } else if (with_tuple) {
      target = parse_tuple(true, true, std::move(extra_end), false, with_namespace);
    } else {
      target = parse_primary(with_namespace);
    }
    if (!can_assign(*target)) fail(target->offset, "can't assign to this expression");
    return target;
  }

  ExprPtr parse_expression(bool with_condition) {
    NestingGuard guard(*this, current().offset);
    return with_condition ? parse_condition() : parse_or();
  }

  ExprPtr parse_condition() {
    const std::size_t offset = current().offset;
    const std::size_t pending = unknown_filters_.size();
    ExprPtr expr = parse_or();
    bool any = false;
    ChainGuard chain(*this);
    while (true) {
      Override<bool> soft(soft_, true);
      if (!is_name(current(), "if")) break;
      chain.deepen(next().offset);
      any = true;
      ExprPtr cond = make_expr(ExprKind::kCondition, offset);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condition() : nullptr;
      cond->operands.push_back(std::move(test));
      cond->operands.push_back(std::move(expr));
      cond->operands.push_back(std::move(otherwise));
      expr = std::move(cond);
    }
    // jinja2 compiles a whole inline if (its first branch too) as a soft frame.
    if (any) unknown_filters_.resize(pending);
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainGuard chain(*this);
    while (is_name(current(), "or")) {
      const std::size_t offset = next().offset;
      chain.deepen(offset);
      left = make_binary(ExprKind::kOr, offset, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainGuard chain(*this);
    while (is_name(current(), "and")) {
      const std::size_t offset = next().offset;
      chain.deepen(offset);
      left = make_binary(ExprKind::kAnd, offset, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name(current(), "not")) {
      const std::size_t offset = next().offset;
      NestingGuard guard(*this, offset);
      return make_unary(ExprKind::kNot, offset, parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const std::size_t offset = current().offset;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      const Token& t = current();
      if (t.type == TokenType::kOperator && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                             t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        next();
      } else if (is_name(t, "in")) {
        op = "in";
        next();
      } else if (is_name(t, "not") && is_name(look(), "in")) {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make_expr(ExprKind::kCompare, offset);
        cmp->operands.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->operands.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*operand)()) {
    ExprPtr left = (this->*operand)();
    ChainGuard chain(*this);
    while (current().type == TokenType::kOperator &&
           std::find(ops.begin(), ops.end(), current().text) != ops.end()) {
      const Token& t = next();
      chain.deepen(t.offset);
      ExprPtr e = make_binary(ExprKind::kBinary, t.offset, std::move(left), (this->*operand)());
      e->name = t.text;
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }

  ExprPtr parse_concat() {
    const std::size_t offset = current().offset;
    ExprPtr first = parse_math2();
    if (!is_op(current(), "~")) return first;
    ExprPtr concat = make_expr(ExprKind::kConcat, offset);
    concat->operands.push_back(std::move(first));
    while (skip_op("~")) concat->operands.push_back(parse_math2());
    return concat;
  }

  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }

  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_filtered); }

  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    const Token& t = current();
    ExprPtr node;
    if (is_op(t, "-") || is_op(t, "+")) {
      NestingGuard guard(*this, t.offset);
      const ExprKind kind = t.text == "-" ? ExprKind::kNegate : ExprKind::kPlus;
      const std::size_t offset = next().offset;
      node = make_unary(kind, offset, parse_unary(false));
    } else {
      node = parse_primary(false);
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary(bool with_namespace) {
    const Token& t = current();
    ExprPtr node;
    if (t.type == TokenType::kName) {
      next();
      if (t.text == "true" || t.text == "false" || t.text == "True" || t.text == "False") {
        node = make_expr(ExprKind::kLiteral, t.offset);
        node->literal = LiteralKind::kBool;
        node->integer = t.text == "true" || t.text == "True";
      } else if (t.text == "none" || t.text == "None") {
        node = make_expr(ExprKind::kLiteral, t.offset);
        node->literal = LiteralKind::kNone;
      } else if (with_namespace && is_op(current(), ".")) {
        next();
        node = make_expr(ExprKind::kNsRef, t.offset);
        node->name = t.text;
        node->attr = expect_name().text;
      } else {
        node = make_expr(ExprKind::kName, t.offset);
        node->name = t.text;
        if (t.text == "varargs" || t.text == "kwargs") {
          for (Stmt* macro : macros_) (t.text == "varargs" ? macro->uses_varargs : macro->uses_kwargs) = true;
        }
      }
    } else if (t.type == TokenType::kString) {
      node = make_expr(ExprKind::kLiteral, t.offset);
      node->literal = LiteralKind::kString;
      while (current().type == TokenType::kString) node->text += next().text;  // adjacent literals join
    } else if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
      next();
      node = make_expr(ExprKind::kLiteral, t.offset);
      node->literal = t.type == TokenType::kInteger ? LiteralKind::kInt : LiteralKind::kFloat;
      node->integer = t.integer;
      node->number = t.number;
    } else if (is_op(t, "(")) {
      next();
      node = parse_tuple(false, true, {}, true, false);
      expect_op(")");
    } else if (is_op(t, "[")) {
      node = parse_list();
    } else if (is_op(t, "{")) {
      node = parse_dict();
    } else {
      fail(t.offset, fmt::format("unexpected {}", describe(t)));
    }
    return node;
  }

  bool is_tuple_end(const std::vector<std::string_view>& extra_end) const {
    const Token& t = current();
    if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || is_op(t, ")")) return true;
    if (t.type == TokenType::kEof) return true;
    return t.type == TokenType::kName &&
           std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  ExprPtr parse_tuple(bool simplified, bool with_condition, std::vector<std::string_view> extra_end,
                      bool explicit_parentheses, bool with_namespace) {
    const std::size_t offset = current().offset;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condition));
      if (is_op(current(), ",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses)
        fail(current().offset, fmt::format("expected an expression, got {}", describe(current())));
    }
    ExprPtr tuple = make_expr(ExprKind::kTuple, offset);
    tuple->operands = std::move(items);
    return tuple;
  }

  ExprPtr parse_list() {
    ExprPtr list = make_expr(ExprKind::kList, expect_op("[").offset);
    while (!is_op(current(), "]")) {
      if (!list->operands.empty()) expect_op(",");
      if (is_op(current(), "]")) break;
      list->operands.push_back(parse_expression(true));
    }
    expect_op("]");
    return list;
  }

  ExprPtr parse_dict() {
    ExprPtr dict = make_expr(ExprKind::kDict, expect_op("{").offset);
    while (!is_op(current(), "}")) {
      if (!dict->operands.empty()) expect_op(",");
      if (is_op(current(), "}")) break;
      dict->operands.push_back(parse_expression(true));
      expect_op(":");
      dict->operands.push_back(parse_expression(true));
    }
    expect_op("}");
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (is_op(current(), ".") || is_op(current(), "[")) {
        chain.deepen(current().offset);
        node = parse_subscript(std::move(node));
      } else if (is_op(current(), "(")) {
        chain.deepen(current().offset);
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (is_op(current(), "|")) {
        node = parse_filter(std::move(node), false);  // counts its own links
      } else if (is_name(current(), "is")) {
        chain.deepen(current().offset);
        node = parse_test(std::move(node));
      } else if (is_op(current(), "(")) {
        chain.deepen(current().offset);
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = current();
      next();
      if (attr.type == TokenType::kName) {
        ExprPtr e = make_unary(ExprKind::kGetattr, t.offset, std::move(node));
        e->name = attr.text;
        return e;
      }
      if (attr.type != TokenType::kInteger) fail(attr.offset, "expected a name or a number after '.'");
      ExprPtr index = make_expr(ExprKind::kLiteral, attr.offset);
      index->literal = LiteralKind::kInt;
      index->integer = attr.integer;
      return make_binary(ExprKind::kGetitem, t.offset, std::move(node), std::move(index));
    }
    std::vector<ExprPtr> args;
    while (!is_op(current(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr index;
    if (args.size() == 1) {
      index = std::move(args[0]);
    } else {
      index = make_expr(ExprKind::kTuple, t.offset);
      index->operands = std::move(args);
    }
    return make_binary(ExprKind::kGetitem, t.offset, std::move(node), std::move(index));
  }

  ExprPtr parse_subscribed() {
    const std::size_t offset = current().offset;
    ExprPtr start;
    if (!is_op(current(), ":")) {
      start = parse_expression(true);
      if (!is_op(current(), ":")) return start;
    }
    next();  // the first ':'
    ExprPtr slice = make_expr(ExprKind::kSlice, offset);
    slice->operands.push_back(std::move(start));
    const auto slice_end = [&] { return is_op(current(), "]") || is_op(current(), ","); };
    slice->operands.push_back(is_op(current(), ":") || slice_end() ? nullptr : parse_expression(true));
    if (skip_op(":")) {
      slice->operands.push_back(slice_end() ? nullptr : parse_expression(true));
    } else {
      slice->operands.push_back(nullptr);
    }
    return slice;
  }

  void parse_call_args(Expr& call) {
    const Token& open = expect_op("(");
    bool require_comma = false;
    const auto ensure = [&](bool ok) {
      if (!ok) fail(open.offset, "invalid syntax for function call expression");
    };
    while (!is_op(current(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(current(), ")")) break;
      }
      if (is_op(current(), "*")) {
        ensure(!call.star_args && !call.star_kwargs);
        next();
        call.star_args = parse_expression(true);
      } else if (is_op(current(), "**")) {
        ensure(!call.star_kwargs);
        next();
        call.star_kwargs = parse_expression(true);
      } else if (current().type == TokenType::kName && is_op(look(), "=")) {
        ensure(!call.star_kwargs);
        std::string key = next().text;
        next();
        call.keywords.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!call.star_args && !call.star_kwargs && call.keywords.empty());
        call.operands.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    const std::size_t offset = node->offset;  // errors in a call point at what is called
    ExprPtr call = make_unary(ExprKind::kCall, offset, std::move(node));
    parse_call_args(*call);
    return call;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name().text;
    while (skip_op(".")) name += "." + expect_name().text;
    return name;
  }

  void note_unknown(std::size_t offset, std::string_view what, const std::string& name, bool known_to_jinja) {
    const std::string message =
        known_to_jinja ? fmt::format("the '{}' {} is not supported in chat templates", name, what)
                       : fmt::format("no {} named '{}'", what, name);
    if (!soft_) unknown_filters_.emplace_back(offset, message);
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    ChainGuard chain(*this);
    while (is_op(current(), "|") || start_inline) {
      chain.deepen(current().offset);
      if (!start_inline) next();
      const std::size_t offset = current().offset;
      ExprPtr filter = make_unary(ExprKind::kFilter, offset, std::move(node));
      filter->name = parse_dotted_name();
      if (!is_supported_filter(filter->name))
        note_unknown(offset, "filter", filter->name, is_jinja_filter(filter->name));
      if (is_op(current(), "(")) parse_call_args(*filter);
      node = std::move(filter);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const std::size_t offset = next().offset;  // 'is'
    const bool negated = skip_name("not");
    const std::size_t name_offset = current().offset;
    ExprPtr test = make_unary(ExprKind::kTest, offset, std::move(node));
    test->name = parse_dotted_name();
    if (!is_supported_test(test->name))
      note_unknown(name_offset, "test", test->name, is_jinja_test(test->name));
    const Token& t = current();
    if (is_op(t, "(")) {
      parse_call_args(*test);
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInteger ||
                t.type == TokenType::kFloat || is_op(t, "(") || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail(t.offset, "you cannot chain multiple tests with 'is'");
      test->operands.push_back(parse_postfix(parse_primary(false)));
    }
    return negated ? make_unary(ExprKind::kNot, offset, std::move(test)) : std::move(test);
  }

  std::string source_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
  bool soft_ = false;          // inside an if statement or inline if: unknown filters fail only when run
  int loop_depth_ = 0;         // for loops around the current statement (within the current macro)
  std::vector<Stmt*> macros_;  // macros being parsed
  std::vector<OpenBlock> open_blocks_;
  std::vector<std::vector<std::string_view>> end_stack_;
  std::vector<std::pair<std::size_t, std::string>> unknown_filters_;  // reported after parsing
};

}  // namespace

std::unique_ptr<Template> parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace tokenmill::jinja
