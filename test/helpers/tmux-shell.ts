/**
 * An interactive shell in a real terminal (a tmux pane on a private server socket), so tests type
 * keys as a person does (Tab included) and read the screen back: what readline and zle really do
 * with a completion, which a direct call of the completion function cannot show.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/** A shell running in its own tmux server; `stop()` ends both. */
export class TmuxShell {
  private readonly socket: string;

  /** Starts `command` in a pane `columns` wide inside `dir` (the socket lives there too). */
  constructor(dir: string, command: string[], columns = 250, env: Record<string, string> = {}) {
    this.socket = join(dir, 'tmux.sock');
    const exports = Object.entries(env).flatMap(([name, value]) => ['-e', `${name}=${value}`]);
    this.tmux('new-session', '-d', '-x', String(columns), '-y', '50', '-c', dir, ...exports, ...command);
  }

  private tmux(...args: string[]): string {
    const r = spawnSync('tmux', ['-S', this.socket, '-f', '/dev/null', ...args], { encoding: 'utf8', timeout: 10_000 });
    if (r.status !== 0) throw new Error(`tmux ${args[0] ?? ''} failed: ${r.stderr || r.error?.message || `status ${String(r.status)}`}`);
    return r.stdout;
  }

  /** Types `text` literally. */
  type(text: string): void {
    this.tmux('send-keys', '-l', text);
  }

  /** Presses named keys (`Tab`, `Enter`, `C-u`). */
  press(...keys: string[]): void {
    this.tmux('send-keys', ...keys);
  }

  /** The visible screen, wrapped rows joined into their lines, the blanks tmux pads rows with removed. */
  screen(): string {
    return this.tmux('capture-pane', '-p', '-J').split('\n').map((row) => row.trimEnd()).join('\n');
  }

  /**
   * Waits until the screen holds `marker` (keys are handled in order, so a marker typed after a
   * Tab appears only once the completion is done); gives up after `limitMs`.
   */
  async waitFor(marker: string | RegExp, limitMs = 15_000): Promise<string> {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const screen = this.screen();
      if (typeof marker === 'string' ? screen.includes(marker) : marker.test(screen)) return screen;
      if (Date.now() > deadline) throw new Error(`the screen never showed ${String(marker)}:\n${screen}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Ends the shell and the tmux server. */
  stop(): void {
    spawnSync('tmux', ['-S', this.socket, 'kill-server'], { timeout: 10_000 });
  }
}
