'use strict';
/**
 * The checks every gpu-validate step makes of a gpugate command that prints one JSON document:
 * it ended with an exit code the step accepts (a crash, a signal, a timeout or exit 70, gpugate's
 * internal error, never is), printed JSON on stdout, the document matches the schema the package
 * ships for it, and it states the exit code the process ended with.
 */
const { readJson, readText } = require('./step-result.cjs');
const { validate } = require('./json-schema.cjs');

/** What an exit code means, for a check's detail. */
function exitMeaning(rc) {
  if (rc === 70) return ' (gpugate internal error)';
  if (rc === 124 || rc === 137) return ' (timed out)';
  if (rc > 128) return ` (killed by signal ${rc - 128})`;
  return '';
}

/**
 * Runs those checks on StepResult `step` for `command` (e.g. 'doctor'), whose stdout is in
 * `file`, stderr in `stderrFile`, exit code `rc`; `accepted` lists the exit codes that are a
 * result; `schemaDir` holds `<command>.schema.json`. Returns the document, or null when it
 * cannot be judged further.
 */
function judgeCommandDocument(step, { command, file, stderrFile, rc, accepted, schemaDir }) {
  const label = `gpugate ${command} --json`;
  const tail = readText(stderrFile).trim().split('\n').slice(-3).join(' | ');
  step.check(`${label} exit code`, accepted.includes(rc),
    `exit ${rc}${exitMeaning(rc)}${accepted.includes(rc) ? '' : ` (expected one of ${accepted.join(', ')})${tail === '' ? '' : `: ${tail}`}`}`);
  const doc = readJson(file);
  if (!step.check(`${label} parses`, doc.error === undefined, doc.error ?? 'one JSON object')) return null;
  let errors;
  try {
    errors = validate(doc.value, schemaDir, `urn:gpugate:schema:${command}`);
  } catch (err) {
    step.check(`${label} matches schemas/${command}.schema.json`, false, `the schema could not be applied: ${err.message}`);
    return null;
  }
  step.check(`${label} matches schemas/${command}.schema.json`, errors.length === 0,
    errors.length === 0 ? `schemaVersion ${doc.value.schemaVersion}` : `${errors.length} error(s): ${errors.slice(0, 5).join('; ')}`);
  step.check(`${label} states its exit code`, doc.value.exitCode === rc, `document exitCode ${JSON.stringify(doc.value.exitCode)}, process exit ${rc}`);
  return errors.length === 0 ? doc.value : null;
}

module.exports = { judgeCommandDocument };
