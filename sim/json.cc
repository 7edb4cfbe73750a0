// A small JSON reader for simulator scenarios: the recursive-descent parser.
//
// Tracks line and column while scanning so every value and error carries a source position.
// Nesting depth is bounded so a hostile file cannot overflow the stack of the NVML client.
#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace gpugate_sim {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& m : members) {
    if (m.key == key) return m.value.get();
  }
  return nullptr;
}

const char* describeKind(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::Null: return "null";
    case JsonValue::Kind::Bool: return "a boolean";
    case JsonValue::Kind::Number: return "a number";
    case JsonValue::Kind::String: return "a string";
    case JsonValue::Kind::Array: return "an array";
    case JsonValue::Kind::Object: return "an object";
  }
  return "a value";
}

namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(const std::string& text, JsonError& error) : text_(text), error_(error) {}

  std::unique_ptr<JsonValue> parseDocument() {
    skipSpace();
    auto value = parseValue(0);
    if (!value) return nullptr;
    skipSpace();
    if (i_ < text_.size()) return fail("expected the end of the document after the top-level value");
    return value;
  }

 private:
  const std::string& text_;
  JsonError& error_;
  size_t i_ = 0;
  SourcePos pos_;

  std::unique_ptr<JsonValue> fail(const std::string& message) {
    error_.pos = pos_;
    error_.message = message;
    return nullptr;
  }
  bool failBool(const std::string& message) {
    fail(message);
    return false;
  }

  bool atEnd() const { return i_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[i_]; }
  void advance() {
    if (atEnd()) return;
    if (text_[i_] == '\n') {
      pos_.line++;
      pos_.column = 1;
    } else if ((static_cast<unsigned char>(text_[i_]) & 0xC0) != 0x80) {
      pos_.column++;  // count characters, not UTF-8 continuation bytes
    }
    i_++;
  }
  void skipSpace() {
    while (!atEnd()) {
      char c = text_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') advance();
      else break;
    }
  }

  std::unique_ptr<JsonValue> parseValue(int depth) {
    if (depth > kMaxDepth) return fail("expected at most 64 levels of nesting");
    if (atEnd()) return fail("expected a value, found the end of the file");
    char c = peek();
    if (c == '{') return parseObject(depth);
    if (c == '[') return parseArray(depth);
    if (c == '"') {
      auto v = std::make_unique<JsonValue>();
      v->kind = JsonValue::Kind::String;
      v->pos = pos_;
      if (!parseString(v->stringValue)) return nullptr;
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
    if (matchWord("true") || matchWord("false") || matchWord("null")) {
      auto v = std::make_unique<JsonValue>();
      v->pos = pos_;
      if (c == 'n') {
        v->kind = JsonValue::Kind::Null;
        for (int k = 0; k < 4; k++) advance();
      } else {
        v->kind = JsonValue::Kind::Bool;
        v->boolValue = (c == 't');
        for (int k = 0; k < (c == 't' ? 4 : 5); k++) advance();
      }
      return v;
    }
    return fail(std::string("expected a value (object, array, string, number, true, false or null), found '") +
                describeChar(c) + "'");
  }

  static std::string describeChar(char c) {
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      return buf;
    }
    return std::string(1, c);
  }

  bool matchWord(const char* word) const {
    size_t n = strlen(word);
    return text_.compare(i_, n, word) == 0;
  }

  std::unique_ptr<JsonValue> parseObject(int depth) {
    auto v = std::make_unique<JsonValue>();
    v->kind = JsonValue::Kind::Object;
    v->pos = pos_;
    advance();  // '{'
    skipSpace();
    if (peek() == '}') {
      advance();
      return v;
    }
    for (;;) {
      skipSpace();
      if (peek() != '"') return fail("expected a quoted member name or '}'");
      JsonMember member;
      member.keyPos = pos_;
      if (!parseString(member.key)) return nullptr;
      for (const auto& existing : v->members) {
        if (existing.key == member.key) {
          error_.pos = member.keyPos;
          error_.message = "expected each member name once, \"" + member.key + "\" appears twice";
          return nullptr;
        }
      }
      skipSpace();
      if (peek() != ':') return fail("expected ':' after the member name \"" + member.key + "\"");
      advance();
      skipSpace();
      member.value = parseValue(depth + 1);
      if (!member.value) return nullptr;
      v->members.push_back(std::move(member));
      skipSpace();
      if (peek() == ',') {
        advance();
        skipSpace();
        if (peek() == '}') return fail("expected another member after ',' (trailing commas are not JSON)");
        continue;
      }
      if (peek() == '}') {
        advance();
        return v;
      }
      return fail("expected ',' or '}' after an object member");
    }
  }

  std::unique_ptr<JsonValue> parseArray(int depth) {
    auto v = std::make_unique<JsonValue>();
    v->kind = JsonValue::Kind::Array;
    v->pos = pos_;
    advance();  // '['
    skipSpace();
    if (peek() == ']') {
      advance();
      return v;
    }
    for (;;) {
      skipSpace();
      auto item = parseValue(depth + 1);
      if (!item) return nullptr;
      v->items.push_back(std::move(item));
      skipSpace();
      if (peek() == ',') {
        advance();
        skipSpace();
        if (peek() == ']') return fail("expected another element after ',' (trailing commas are not JSON)");
        continue;
      }
      if (peek() == ']') {
        advance();
        return v;
      }
      return fail("expected ',' or ']' after an array element");
    }
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool parseHex4(uint32_t& out) {
    out = 0;
    for (int k = 0; k < 4; k++) {
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else return failBool("expected four hex digits after \\u");
      out = out * 16 + d;
      advance();
    }
    return true;
  }

  bool parseString(std::string& out) {
    advance();  // opening quote
    for (;;) {
      if (atEnd()) return failBool("expected a closing '\"', found the end of the file");
      char c = peek();
      if (c == '"') {
        advance();
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return failBool("expected a closing '\"' before the end of the line (control characters must be escaped)");
      }
      if (c != '\\') {
        out += c;
        advance();
        continue;
      }
      advance();
      char e = peek();
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          advance();
          uint32_t cp;
          if (!parseHex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && i_ + 1 < text_.size() && text_[i_ + 1] == 'u') {
            advance();
            advance();
            uint32_t low;
            if (!parseHex4(low)) return false;
            if (low >= 0xDC00 && low <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          appendUtf8(out, cp);
          continue;
        }
        default:
          return failBool("expected an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX) after '\\'");
      }
      advance();
    }
  }

  std::unique_ptr<JsonValue> parseNumber() {
    auto v = std::make_unique<JsonValue>();
    v->kind = JsonValue::Kind::Number;
    v->pos = pos_;
    size_t start = i_;
    bool integral = true;
    if (peek() == '-') advance();
    if (peek() == '0') {
      advance();
      if (peek() >= '0' && peek() <= '9') return fail("expected a number without leading zeros");
    } else if (peek() >= '1' && peek() <= '9') {
      while (peek() >= '0' && peek() <= '9') advance();
    } else {
      return fail("expected a digit in the number");
    }
    if (peek() == '.') {
      integral = false;
      advance();
      if (!(peek() >= '0' && peek() <= '9')) return fail("expected a digit after the decimal point");
      while (peek() >= '0' && peek() <= '9') advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!(peek() >= '0' && peek() <= '9')) return fail("expected a digit in the exponent");
      while (peek() >= '0' && peek() <= '9') advance();
    }
    std::string literal = text_.substr(start, i_ - start);
    v->numberValue = strtod(literal.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long parsed = strtoll(literal.c_str(), nullptr, 10);
      if (errno == 0) {
        v->isInteger = true;
        v->intValue = parsed;
      }
    }
    return v;
  }
};

}  // namespace

std::unique_ptr<JsonValue> parseJson(const std::string& text, JsonError& error) {
  Parser parser(text, error);
  return parser.parseDocument();
}

}  // namespace gpugate_sim
