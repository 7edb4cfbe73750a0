'use strict';
/**
 * Checks a gpugate JSON document against the schema the package ships for it (schemas/), without
 * a dependency: an operator's host has the packed gpugate and Node.js, not ajv. Implements the
 * draft-07 keywords those schemas use; a keyword it does not know is an error, never a silent pass.
 */
const fs = require('node:fs');
const path = require('node:path');

/** Keywords that describe and do not constrain. */
const ANNOTATIONS = new Set(['$schema', '$id', 'title', 'description', 'definitions']);
const CONSTRAINTS = new Set(['$ref', 'type', 'required', 'properties', 'additionalProperties', 'items', 'oneOf', 'enum', 'const', 'pattern', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum']);

/** Throws when `schema` or a schema inside it uses a keyword this checker does not implement. */
function requireSupported(schema, where) {
  if (typeof schema === 'boolean') return;
  for (const [key, value] of Object.entries(schema)) {
    if (!ANNOTATIONS.has(key) && !CONSTRAINTS.has(key)) throw new Error(`${where}: schema keyword ${JSON.stringify(key)} is not supported by this checker`);
    if (key === 'properties' || key === 'definitions') {
      for (const [name, sub] of Object.entries(value)) requireSupported(sub, `${where}/${key}/${name}`);
    } else if (key === 'items' || key === 'additionalProperties') {
      requireSupported(value, `${where}/${key}`);
    } else if (key === 'oneOf') {
      value.forEach((sub, i) => requireSupported(sub, `${where}/oneOf/${i}`));
    }
  }
}

/** Every `*.schema.json` of DIR, by its `$id`; throws on one this checker cannot apply faithfully. */
function loadSchemas(dir) {
  const byId = new Map();
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.schema.json'))) {
    const where = path.join(dir, file);
    const schema = JSON.parse(fs.readFileSync(where, 'utf8'));
    if (typeof schema.$id !== 'string') throw new Error(`${where}: no $id`);
    requireSupported(schema, where);
    byId.set(schema.$id, schema);
  }
  return byId;
}

function typeOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function hasType(value, type) {
  if (type === 'integer') return Number.isInteger(value);
  return typeOf(value) === type;
}

/** Deep equality of JSON values (for enum and const). */
function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

class Validator {
  constructor(schemas) {
    this.schemas = schemas;
  }

  /** The schema `ref` names, seen from the document `root`; returns `{ schema, root }`. */
  resolve(ref, root) {
    const [id, pointer = ''] = ref.split('#');
    const base = id === '' ? root : this.schemas.get(id);
    if (base === undefined) throw new Error(`$ref ${ref}: no schema with $id ${id}`);
    let schema = base;
    for (const part of pointer.split('/').filter((p) => p !== '')) {
      schema = schema?.[part];
      if (schema === undefined) throw new Error(`$ref ${ref}: ${pointer} does not exist`);
    }
    return { schema, root: base };
  }

  /** The errors of `value` against `schema`, as `PATH: what` strings; none when it conforms. */
  errors(value, schema, root, where) {
    if (schema === true) return [];
    if (schema === false) return [`${where}: no value is allowed here`];
    const out = [];
    if (schema.$ref !== undefined) {
      const target = this.resolve(schema.$ref, root);
      out.push(...this.errors(value, target.schema, target.root, where));
    }
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some((t) => hasType(value, t))) return [...out, `${where}: expected ${types.join(' or ')}, found ${typeOf(value)}`];
    }
    if (schema.const !== undefined && !same(value, schema.const)) out.push(`${where}: expected ${JSON.stringify(schema.const)}, found ${JSON.stringify(value)}`);
    if (schema.enum !== undefined && !schema.enum.some((e) => same(value, e))) {
      out.push(`${where}: ${JSON.stringify(value)} is not one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
    }
    if (typeof value === 'number') {
      if (schema.minimum !== undefined && value < schema.minimum) out.push(`${where}: ${value} is below the minimum ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) out.push(`${where}: ${value} is above the maximum ${schema.maximum}`);
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) out.push(`${where}: ${value} is not above ${schema.exclusiveMinimum}`);
      if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) out.push(`${where}: ${value} is not below ${schema.exclusiveMaximum}`);
    }
    if (typeof value === 'string' && schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) {
      out.push(`${where}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
    }
    if (Array.isArray(value) && schema.items !== undefined) {
      value.forEach((item, i) => out.push(...this.errors(item, schema.items, root, `${where}[${i}]`)));
    }
    if (typeOf(value) === 'object') {
      for (const name of schema.required ?? []) {
        if (!Object.hasOwn(value, name)) out.push(`${where}: required field "${name}" is missing`);
      }
      for (const [name, item] of Object.entries(value)) {
        const sub = schema.properties?.[name];
        if (sub !== undefined) out.push(...this.errors(item, sub, root, `${where}.${name}`));
        else if (schema.additionalProperties !== undefined) out.push(...this.errors(item, schema.additionalProperties, root, `${where}.${name}`));
      }
    }
    if (schema.oneOf !== undefined) {
      const results = schema.oneOf.map((branch) => this.errors(value, branch, root, where));
      const matching = results.filter((r) => r.length === 0).length;
      if (matching === 0) {
        // The closest form: one whose type fits, then the fewest errors.
        const misfit = (r) => (r.some((e) => e.startsWith(`${where}: expected `) && e.includes(', found ')) ? 1 : 0);
        const closest = results.reduce((a, b) => (misfit(b) < misfit(a) || (misfit(b) === misfit(a) && b.length < a.length) ? b : a));
        out.push(`${where}: matches none of its ${schema.oneOf.length} forms (closest: ${closest.slice(0, 3).join('; ')})`);
      } else if (matching > 1) {
        out.push(`${where}: matches ${matching} of its forms, exactly one allowed`);
      }
    }
    return out;
  }
}

/** The errors of `doc` against the schema `$id` among those of `dir` (e.g. 'urn:gpugate:schema:doctor'). */
function validate(doc, dir, id) {
  const schemas = loadSchemas(dir);
  const root = schemas.get(id);
  if (root === undefined) throw new Error(`${dir} has no schema ${id}`);
  return new Validator(schemas).errors(doc, root, root, '$');
}

module.exports = { validate, loadSchemas };
