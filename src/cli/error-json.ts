/**
 * The shape of an error in every `--json` document, apart from the documents that use it
 * (json-result.ts, json-error.ts), so each can name it without importing the other.
 */

/** An error as every document's `error` field gives it. */
export interface ErrorJson {
  name: string;
  code: string | null;
  message: string;
}
