/**
 * vitest global setup: makes sure dist/ (the compiled TypeScript that the CLI tests and other
 * subprocess tests run) is current, by running `npm run build:ts` once when any source under
 * src/ is newer than dist/cli/main.js, or dist/ is missing.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = join(__dirname, '..');

function newestSourceMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSourceMs(path));
    else if (/\.m?ts$/.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

export default function setup(): void {
  const built = join(root, 'dist', 'cli', 'main.js');
  const sources = Math.max(newestSourceMs(join(root, 'src')), statSync(join(root, 'package.json')).mtimeMs);
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return;
  execFileSync('npm', ['run', 'build:ts'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
}
