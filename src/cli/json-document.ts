/**
 * Every `--json` document starts with `schemaVersion`, the version of the JSON Schemas shipped in
 * the package's schemas/ folder (one per command). The promise: within one major version documents
 * only gain fields (MINOR grows); removing, renaming or changing the meaning of a field raises
 * MAJOR. Consumers should check MAJOR and ignore fields they do not know.
 */

/** MAJOR.MINOR of the documents this version prints (the pattern in schemas/common.schema.json). */
export const SCHEMA_VERSION = '1.2';

/**
 * One document as one line of stdout, `schemaVersion` first. JSON.stringify leaves U+2028 and
 * U+2029 raw (valid JSON, but line breaks to many readers); outside strings they cannot occur, so
 * writing them as escapes changes no value.
 */
export function jsonDocument(fields: object): string {
  const text = JSON.stringify({ schemaVersion: SCHEMA_VERSION, ...fields }).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
  return `${text}\n`;
}
