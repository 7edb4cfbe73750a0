/**
 * The holder classes are written once (src/gate/holder-classes.ts). What cannot import it, the
 * JSON schema's enum and docs/cli.md, is checked against it here; what derives from it, `--help`
 * and the Prometheus help, is checked as the real CLI prints it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  HOLDER_CATALOGUE,
  HOLDER_CLASSES,
  LIVE_HOLDER_CLASSES,
  RELEASING_HOLDER_CLASSES,
  STALE_HOLDER_CLASSES,
  type HolderClass,
} from '../../src/gate/holder-classes';
import * as api from '../../src/index';
import { cliEnv, runCli } from '../helpers/cli';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';

const cliDoc = readFileSync(join(repoRoot(), 'docs/cli.md'), 'utf8');

/** The names of the catalogue records with `flag` set, in catalogue order. */
function namesWith(flag: 'stale' | 'releasing' | 'live'): HolderClass[] {
  return HOLDER_CATALOGUE.filter((record) => record[flag]).map((record) => record.name);
}

/** The backquoted words in `text`, in order. */
function quotedWords(text: string): string[] {
  return Array.from(text.matchAll(/`([^`]+)`/g), (match) => match[1]!);
}

/** The rows of the holders table in docs/cli.md, split into trimmed cells. */
function docsTableRows(): string[][] {
  const section = cliDoc.slice(cliDoc.indexOf('### `gpugate holders'));
  const header = '| class | meaning | stale | releasing | live | what gpugate does |';
  const start = section.indexOf(header);
  expect(start, `docs/cli.md: the holders table with the header ${header}`).toBeGreaterThanOrEqual(0);
  const lines = section.slice(start).split('\n');
  const table = lines.slice(2, lines.findIndex((line) => !line.startsWith('|')));
  return table.map((line) => line.slice(1, -1).split(' | ').map((cell) => cell.trim()));
}

describe('the holder catalogue', () => {
  it('names each class once, and the sets are exactly the flagged records', () => {
    expect(new Set(HOLDER_CLASSES).size).toBe(HOLDER_CATALOGUE.length);
    expect(HOLDER_CLASSES).toEqual(HOLDER_CATALOGUE.map((record) => record.name));
    expect([...STALE_HOLDER_CLASSES]).toEqual(namesWith('stale'));
    expect([...RELEASING_HOLDER_CLASSES]).toEqual(namesWith('releasing'));
    expect([...LIVE_HOLDER_CLASSES]).toEqual(namesWith('live'));
  });

  it('keeps the facts the gate relies on: a live class neither releases nor is stale, and every class says what it means and what gpugate does', () => {
    for (const record of HOLDER_CATALOGUE) {
      if (record.live) expect({ name: record.name, stale: record.stale, releasing: record.releasing }).toEqual({ name: record.name, stale: false, releasing: false });
      expect(record.meaning, record.name).not.toBe('');
      expect(record.action, record.name).not.toBe('');
    }
    // The memory of a stale orphan or leftover is not coming back by itself; a zombie's is.
    expect(STALE_HOLDER_CLASSES.has('zombie_live_threads')).toBe(true);
    expect(RELEASING_HOLDER_CLASSES.has('zombie')).toBe(true);
    expect(RELEASING_HOLDER_CLASSES.has('orphan')).toBe(false);
  });

  it('the package exports the catalogue (docs/cli.md says so); the sets derived from it stay internal', () => {
    expect(api.HOLDER_CATALOGUE).toBe(HOLDER_CATALOGUE);
    for (const name of ['HOLDER_CLASSES', 'STALE_HOLDER_CLASSES', 'RELEASING_HOLDER_CLASSES', 'LIVE_HOLDER_CLASSES']) expect(name in api).toBe(false);
    // What a program needs of them is one filter away.
    expect(new Set(HOLDER_CATALOGUE.filter((record) => record.stale).map((record) => record.name))).toEqual(STALE_HOLDER_CLASSES);
    expect(new Set(HOLDER_CATALOGUE.filter((record) => record.releasing).map((record) => record.name))).toEqual(RELEASING_HOLDER_CLASSES);
    expect(new Set(HOLDER_CATALOGUE.filter((record) => record.live).map((record) => record.name))).toEqual(LIVE_HOLDER_CLASSES);
    expect(HOLDER_CATALOGUE.map((record) => record.name)).toEqual(HOLDER_CLASSES);
  });

  it('the JSON schema enumerates exactly the catalogue, in order', () => {
    const common = JSON.parse(readFileSync(join(repoRoot(), 'schemas/common.schema.json'), 'utf8')) as { definitions: { holderClass: { enum: unknown } } };
    expect(common.definitions.holderClass.enum).toEqual(HOLDER_CLASSES);
  });

  it("docs/cli.md's holders table is the catalogue: name, meaning, flags and action per row, in order", () => {
    const yesNo = (flag: boolean): string => (flag ? 'yes' : 'no');
    expect(docsTableRows()).toEqual(HOLDER_CATALOGUE.map((record) => [
      `\`${record.name}\``, record.meaning, yesNo(record.stale), yesNo(record.releasing), yesNo(record.live), record.action,
    ]));
  });

  it("docs/cli.md's lists of stale and of releasing classes are the catalogue's", () => {
    const staleList = /no holder on it is stale \(([^)]*), see/.exec(cliDoc);
    expect(staleList, 'docs/cli.md: "no holder on it is stale (…, see"').not.toBeNull();
    expect(quotedWords(staleList![1]!)).toEqual(namesWith('stale'));
    const releasingList = /still releasing \(([^)]*)\)/.exec(cliDoc);
    expect(releasingList, 'docs/cli.md: "still releasing (…)"').not.toBeNull();
    expect(quotedWords(releasingList![1]!)).toEqual(namesWith('releasing'));
  });

  it('`gpugate holders --help` lists every class, in order', async () => {
    const run = await runCli(['holders', '--help'], { env: cliEnv(null, { COLUMNS: '400' }) });
    expect(run.code).toBe(0);
    const listed = /classified \(([^)]*)\)/.exec(run.stdout);
    expect(listed, run.stdout).not.toBeNull();
    expect(listed![1]!.split(', ')).toEqual(HOLDER_CLASSES);
  });

  it("the Prometheus help of gpugate_gpu_holders names exactly the stale classes, and every class has a series", async () => {
    const scenario = writeScenario({ devices: [simDevice(0)] });
    const run = await runCli(['holders', '--format', 'prometheus'], { env: cliEnv(scenario) });
    expect(run.code, run.stderr).toBe(0);
    const help = /^# HELP gpugate_gpu_holders .*by class \(([^)]*) are stale\)/m.exec(run.stdout);
    expect(help, run.stdout).not.toBeNull();
    expect(help![1]!.split('/')).toEqual(namesWith('stale'));
    const classes = Array.from(run.stdout.matchAll(/^gpugate_gpu_holders\{[^}]*class="([^"]+)"/gm), (match) => match[1]!);
    expect(classes).toEqual(HOLDER_CLASSES);
  });
});
