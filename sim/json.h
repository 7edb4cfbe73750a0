// A small JSON reader for simulator scenarios.
//
// Parses one JSON document into a tree of values, keeping the line and column where every
// value (and every object key) starts, so the scenario reader can say exactly where a file is
// wrong. Integers without a fraction or exponent are kept exactly (64-bit); other numbers are
// doubles. Duplicate object keys are an error. No dependencies beyond the standard library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpugate_sim {

/** Where something starts in the source text (1-based). */
struct SourcePos {
  int line = 1;
  int column = 1;
};

struct JsonValue;

/** One member of an object, in file order. */
struct JsonMember {
  std::string key;
  SourcePos keyPos;
  std::unique_ptr<JsonValue> value;
};

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  SourcePos pos;
  bool boolValue = false;
  bool isInteger = false;     // written without fraction/exponent and fits in int64
  int64_t intValue = 0;       // valid when isInteger
  double numberValue = 0.0;   // always valid for numbers
  std::string stringValue;
  std::vector<std::unique_ptr<JsonValue>> items;  // arrays
  std::vector<JsonMember> members;                // objects

  /** The member named `key`, or nullptr. */
  const JsonValue* find(const std::string& key) const;
};

/** A parse failure: where, and what was expected there. */
struct JsonError {
  SourcePos pos;
  std::string message;  // e.g. "expected ',' or '}' after an object member"
};

/** Parses `text`; on failure returns nullptr and fills `error`. */
std::unique_ptr<JsonValue> parseJson(const std::string& text, JsonError& error);

/** A short name for a value's kind, for messages ("a string", "an array"...). */
const char* describeKind(JsonValue::Kind kind);

}  // namespace gpugate_sim
