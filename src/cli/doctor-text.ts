/**
 * The text form of a doctor report: checks grouped by subject in report order; a failing or
 * warning check in full (summary and advice), the passing checks of a GPU on one line by name,
 * those of the other subjects each with its summary; then a one-line tally. Every piece of text
 * that comes from the host (GPU names, driver strings, kernel log lines) is escaped.
 */
import type { DoctorReport } from '../doctor/doctor';
import type { DoctorCheck } from '../doctor/doctor-check';
import { paint, type Style } from './terminal-style';
import { escapeForTerminal } from './terminal-text';

const MARK: Record<DoctorCheck['status'], { text: string; style: Style }> = {
  pass: { text: 'pass', style: 'green' },
  warn: { text: 'WARN', style: 'yellow' },
  fail: { text: 'FAIL', style: 'red' },
};

/** The report as text; `colour` paints the status marks. */
export function doctorText(report: DoctorReport, exitCode: number, colour: boolean): string {
  const subjects = new Map<string, DoctorCheck[]>();
  for (const check of report.checks) subjects.set(check.subject, [...(subjects.get(check.subject) ?? []), check]);
  const mark = (check: DoctorCheck): string => paint(colour, MARK[check.status].text, MARK[check.status].style);
  const lines: string[] = [];
  for (const [subject, checks] of subjects) {
    lines.push(escapeForTerminal(subject));
    const collapse = subject.startsWith('GPU ');
    for (const check of checks) {
      if (collapse && check.status === 'pass') continue;
      lines.push(`  ${mark(check)}  ${escapeForTerminal(check.summary)}`);
      if (check.status !== 'pass' && check.advice !== undefined) lines.push(`        ${escapeForTerminal(`-> ${check.advice}`)}`);
    }
    const passed = checks.filter((check) => check.status === 'pass');
    if (collapse && passed.length > 0) {
      lines.push(`  ${mark(passed[0] as DoctorCheck)}  ${passed.map((check) => check.id.replace(/^gpu\./, '')).join(', ')}`);
    }
  }
  const count = (status: DoctorCheck['status']): number => report.checks.filter((check) => check.status === status).length;
  lines.push('', `${report.checks.length} checks: ${count('pass')} pass, ${count('warn')} warn, ${count('fail')} fail (exit ${exitCode})`);
  return `${lines.join('\n')}\n`;
}
