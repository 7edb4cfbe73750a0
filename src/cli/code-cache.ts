/**
 * The bundled CLI and its V8 code cache. `npm run build:ts` bundles the command into one file
 * (dist/cli/gpugate-cli.js, scripts/bundle-cli.mjs) and, at build time only, stores V8's compiled
 * form of it beside it; dist/cli/main.js compiles the bundle with that cache, which spares V8 most
 * of its parsing at every start. Nothing here ever writes: a cache is only read, and only when it
 * can be trusted, for a cache is code that the process (often root) runs. It must be a regular
 * file (no symlink followed), owned by root or by the user running gpugate, and writable by no
 * one else; otherwise, or when V8 rejects it (another Node or V8 made it), the bundle is simply
 * compiled from source.
 */
import { closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Script } from 'node:vm';

/** The bundled command, beside dist/cli/main.js. */
export const BUNDLE_FILE = 'gpugate-cli.js';
/** V8's code cache of the bundle, written by the build beside it. */
export const CACHE_FILE = 'gpugate-cli.v8-cache';

/** Group- or world-writable: someone besides the owner could have written it. */
const WRITABLE_BY_OTHERS = 0o022;

/**
 * The cache's bytes when the file may be trusted, else why not; null when there is none. The checks are made on the open
 * descriptor that is then read, so what was checked is what is used.
 */
export function trustedCacheData(file: string, euid: number = process.geteuid?.() ?? 0): { data: Buffer } | { refused: string } | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null; // no cache was built: compile from source
    return { refused: `${file}: ${code ?? String(error)}` };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { refused: `${file} is not a regular file` };
    if (stat.uid !== 0 && stat.uid !== euid) return { refused: `${file} is owned by uid ${stat.uid}, neither root nor uid ${euid}` };
    if ((stat.mode & WRITABLE_BY_OTHERS) !== 0) return { refused: `${file} is writable by its group or by others (mode ${(stat.mode & 0o777).toString(8)})` };
    return { data: readFileSync(fd) };
  } finally {
    closeSync(fd);
  }
}

/**
 * The bundle is CommonJS's function wrapper around the command's code, written into the file by
 * the build (esbuild's banner and footer), so that the file's bytes are the very script V8
 * compiles, and the cache the build made from them matches.
 */
export const BUNDLE_HEAD = '(function (exports, require, module, __filename, __dirname) {';
export const BUNDLE_TAIL = '\n})';

/** The bundle compiled, with the cache when it is trusted and V8 accepts it. */
export function compileBundle(dir: string, useCache = true): { script: Script; file: string; cache: 'used' | 'rejected' | 'refused' | 'none' } {
  const file = join(dir, BUNDLE_FILE);
  // Latin-1: the build writes the bundle in ASCII only (scripts/bundle-cli.mjs refuses any other
  // byte), which reads the same either way, and Latin-1 skips UTF-8's validation of 470 KB.
  const source = readFileSync(file, 'latin1');
  const cached = useCache ? trustedCacheData(join(dir, CACHE_FILE)) : null;
  if (cached === null || 'refused' in cached) return { script: new Script(source, { filename: file }), file, cache: cached === null ? 'none' : 'refused' };
  const script = new Script(source, { filename: file, cachedData: cached.data });
  return { script, file, cache: script.cachedDataRejected === true ? 'rejected' : 'used' };
}

/** Runs the compiled bundle as the CommonJS module `module` (whose `require` resolves from the bundle's folder). */
export function runBundle(compiled: { script: Script; file: string }, dir: string, module: NodeJS.Module, require: NodeJS.Require): void {
  const run = compiled.script.runInThisContext() as (exports: unknown, require: NodeJS.Require, module: NodeJS.Module, filename: string, dirname: string) => void;
  run(module.exports, require, module, compiled.file, dir);
}
